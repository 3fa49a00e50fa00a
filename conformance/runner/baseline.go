package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// baseline is an expected-failures file as the suite reads it:
//
//	server:
//	  - scenario                 # the whole scenario may fail
//	  - scenario:check-id        # only this check may fail (0.2.0-alpha suites only)
//	client:
//	  - scenario
//
//	flaky:
//	  - scenario[:check-id]      # may fail or pass (a race); never stale
//
// The harness reads this subset of YAML itself (the module uses the standard library
// only): top-level "server:"/"client:"/"flaky:" keys, "- item" lines, "# comments", and
// optionally quoted items. The suite is given only the run's mode list (see render):
// it would call a flaky entry that passes stale, so the harness judges those itself.
type baseline struct {
	lists    map[string][]entry // "server" / "client" / "flaky"
	comments map[string]string  // "key\x00entry" -> trailing comment
}

type entry struct{ scenario, check string }

func (e entry) String() string {
	if e.check == "" {
		return e.scenario
	}
	return e.scenario + ":" + e.check
}

func parseEntry(s string) entry {
	if i := strings.IndexByte(s, ':'); i >= 0 {
		return entry{scenario: s[:i], check: s[i+1:]}
	}
	return entry{scenario: s}
}

func (b *baseline) entries(mode string) []entry { return b.lists[mode] }

// loadBaseline reads path; a missing file is an empty baseline.
func loadBaseline(path string) (*baseline, error) {
	b := &baseline{lists: map[string][]entry{}, comments: map[string]string{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	key := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		content, comment := splitComment(line)
		trimmed := strings.TrimSpace(content)
		switch {
		case trimmed == "" || trimmed == "{}":
		case !strings.HasPrefix(content, " ") && !strings.HasPrefix(content, "-"):
			k, rest, ok := strings.Cut(trimmed, ":")
			rest = strings.TrimSpace(rest)
			if !ok || (k != "server" && k != "client" && k != "flaky") || (rest != "" && rest != "[]") {
				return nil, fmt.Errorf("%s:%d: expected \"server:\", \"client:\" or \"flaky:\", got %q", path, n, line)
			}
			key = k
		case strings.HasPrefix(trimmed, "- "):
			if key == "" {
				return nil, fmt.Errorf("%s:%d: list item outside server:/client:", path, n)
			}
			item := strings.TrimSpace(strings.TrimPrefix(trimmed, "- "))
			if uq, err := strconv.Unquote(item); err == nil {
				item = uq
			} else if len(item) >= 2 && item[0] == '\'' && item[len(item)-1] == '\'' {
				item = item[1 : len(item)-1]
			}
			if item == "" || strings.Contains(item, ": ") {
				return nil, fmt.Errorf("%s:%d: invalid entry %q (write scenario or scenario:check-id, no space after the colon)", path, n, line)
			}
			e := parseEntry(item)
			b.lists[key] = append(b.lists[key], e)
			if c := strings.TrimSpace(comment); c != "" {
				b.comments[key+"\x00"+e.String()] = c
			}
		default:
			return nil, fmt.Errorf("%s:%d: cannot read %q", path, n, line)
		}
	}
	return b, sc.Err()
}

// splitComment splits a line at a " #" (or leading "#") outside quotes.
func splitComment(line string) (string, string) {
	inQuote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inQuote != 0:
			if c == inQuote {
				inQuote = 0
			}
		case c == '"' || c == '\'':
			inQuote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i], line[i+1:]
		}
	}
	return line, ""
}

// render is the file the suite is given for one run (only mode's list matters to it).
func (b *baseline) render(mode string) []byte {
	var buf bytes.Buffer
	for _, key := range []string{"server", "client"} {
		es := b.lists[key]
		if len(es) == 0 {
			fmt.Fprintf(&buf, "%s: []\n", key)
			continue
		}
		fmt.Fprintf(&buf, "%s:\n", key)
		for _, e := range es {
			fmt.Fprintf(&buf, "  - %s\n", strconv.Quote(e.String()))
		}
	}
	return buf.Bytes()
}

// writeBaseline rewrites conformance/baseline/<run>.yml so that it lists exactly the
// failing checks of this run: whole scenarios for the 0.1.16 suite (it knows no
// per-check entries), scenario:check entries for the alpha suites. Comments of kept
// entries are kept.
func (e *environment) writeBaseline(r *run) error {
	if r.res == nil || r.res.status == "ERROR" || r.res.status == "SKIP" || r.res.status == "ABORT" {
		return nil
	}
	if r.baseline != "" {
		return nil // a long-lived run expects what the fresh run's baseline says
	}
	path := filepath.Join(e.baselineDir, r.id+".yml")
	old, err := loadBaseline(path)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var items []string
	for _, p := range r.res.problems {
		if !p.scored || p.flaky {
			continue
		}
		item := p.scenario
		if r.suite.pkg != "0.1" {
			item += ":" + p.check
		}
		if !seen[item] {
			seen[item] = true
			items = append(items, item)
		}
	}
	sort.Strings(items)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Expected failures of the conformance run %s (conformance/runner).\n", r.id)
	buf.WriteString("# The letter after each entry is its cause in conformance/BASELINE.md. The suite fails\n")
	buf.WriteString("# when an entry passes, so remove entries as the proxy is fixed.\n")
	if r.suite.pkg == "0.1" {
		buf.WriteString("# Suite 0.1.16: whole scenarios only (a scenario fails on any FAILURE or WARNING check).\n")
	} else {
		buf.WriteString("# Suite 0.2.0-alpha: scenario:check-id entries.\n")
	}
	writeList := func(key string, items []string) {
		if len(items) == 0 {
			fmt.Fprintf(&buf, "%s: []\n", key)
			return
		}
		fmt.Fprintf(&buf, "%s:\n", key)
		for _, it := range items {
			line := "  - " + it
			if c := old.comments[key+"\x00"+it]; c != "" {
				line += "  # " + c
			}
			buf.WriteString(line + "\n")
		}
	}
	writeList(r.mode, items)
	if flaky := old.entries("flaky"); len(flaky) > 0 {
		buf.WriteString("# Entries that fail or pass from run to run: not given to the suite, never stale.\n")
		var fs []string
		for _, e := range flaky {
			fs = append(fs, e.String())
		}
		writeList("flaky", fs)
	}
	if err := os.MkdirAll(e.baselineDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
