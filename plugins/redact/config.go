package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// DefaultReplacement is the mask used when Config.Replacement is empty.
const DefaultReplacement = "[REDACTED:{name}]"

// Config is the plugin's configuration (decoded from its HCL block by the host, passed
// as JSON). The zero Config uses every built-in detector and DefaultReplacement.
type Config struct {
	// Patterns lists the built-in detectors to use, by name (see Detectors); nil or
	// empty means all of them.
	Patterns []string `json:"patterns"`
	// Custom maps a detector name (letters, digits, "_", "-", "."; not a built-in's) to
	// a Go (RE2) regular expression; every non-empty match is masked whole.
	Custom map[string]string `json:"custom"`
	// Replacement is the mask's template: "{name}" in it is replaced by the detector's
	// name. Empty means DefaultReplacement.
	Replacement string `json:"replacement"`
}

// ParseConfig decodes a Config from JSON strictly: unknown members and trailing data are
// errors. It does not validate the detectors; New does.
func ParseConfig(data []byte) (Config, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("decoding redact config: %w", err)
	}
	if dec.More() {
		return Config{}, errors.New("decoding redact config: data after the JSON object")
	}
	return cfg, nil
}

// clsName holds the bytes of a custom detector's name.
var clsName = newClass(alnum, "_.-")

// validName reports whether name may name a custom detector: 1 to 64 letters, digits,
// "_", "." or "-".
func validName(name string) bool {
	return len(name) >= 1 && len(name) <= 64 && runEnd([]byte(name), 0, clsName) == len(name)
}

// compile checks cfg and returns the detectors it selects in priority order (custom
// detectors by name, then the built-ins in builtins order) and the replacement template.
// Every problem is reported, joined in one error.
func compile(cfg Config) ([]detector, string, error) {
	var errs []error
	tmpl := cfg.Replacement
	if tmpl == "" {
		tmpl = DefaultReplacement
	}
	if !utf8.ValidString(tmpl) {
		errs = append(errs, errors.New("replacement: not valid UTF-8"))
	}

	var dets []detector
	names := make([]string, 0, len(cfg.Custom))
	for name := range cfg.Custom {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d, err := customDetector(name, cfg.Custom[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		dets = append(dets, d)
	}

	want := make([]bool, len(builtins))
	for _, name := range cfg.Patterns {
		i := lookupBuiltin(name)
		if i < 0 {
			errs = append(errs, unknownDetector(name))
			continue
		}
		want[i] = true
	}
	for i, b := range builtins {
		if len(cfg.Patterns) == 0 || want[i] {
			dets = append(dets, detector{name: b.Name, minLen: b.minLen, find: b.find})
		}
	}
	if len(errs) > 0 {
		return nil, "", errors.Join(errs...)
	}
	return dets, tmpl, nil
}

// customDetector compiles one entry of Config.Custom.
func customDetector(name, expr string) (detector, error) {
	switch {
	case lookupBuiltin(name) >= 0:
		return detector{}, fmt.Errorf("custom detector %q: the name is a built-in detector's; choose another", name)
	case !validName(name):
		return detector{}, fmt.Errorf("custom detector %q: a name is 1 to 64 letters, digits, '_', '-' or '.'", name)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return detector{}, fmt.Errorf("custom detector %q: compiling its expression: %w", name, err)
	}
	return detector{name: name, minLen: minMatchLen(re), find: regexpFinder(re)}, nil
}

// unknownDetector is the error for a name in Config.Patterns that is no built-in's: it
// suggests the closest name and lists them all.
func unknownDetector(name string) error {
	known := make([]string, len(builtins))
	for i, b := range builtins {
		known[i] = b.Name
	}
	sort.Strings(known)
	msg := fmt.Sprintf("patterns: unknown detector %q", name)
	if s := closest(name, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return fmt.Errorf("%s (known: %s)", msg, strings.Join(known, ", "))
}
