package trust

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// settings is what of a configuration shapes the vetter, as one comparable string.
func settings(cfg *config.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s", cfg.Proxy.Pin, cfg.Proxy.LockFile, cfg.Proxy.Screen)
	for _, u := range cfg.Upstreams {
		if u.Screen != "" {
			fmt.Fprintf(&b, "|%s=%s", u.Name, u.Screen)
		}
	}
	allow := allowancesOf(cfg)
	fmt.Fprintf(&b, "|allow:%s", allow.String())
	return b.String()
}

// SameSettings reports whether two configurations pin and screen alike (the lock file's
// content aside): a reload between them keeps its vetter and only reads the lock file.
func SameSettings(a, b *config.Config) bool { return settings(a) == settings(b) }

// Configured reports whether the configuration pins or screens anything.
func Configured(cfg *config.Config) bool {
	if cfg.Proxy.Pin != config.PinOff || cfg.Proxy.Screen != config.ScreenOff {
		return true
	}
	for _, u := range cfg.Upstreams {
		if u.Screen != "" && u.Screen != config.ScreenOff {
			return true
		}
	}
	return false
}

// FromConfig makes the vetter the configuration asks for, with its lock file read; nil
// when nothing is pinned or screened. A lock file that exists but cannot be read is an
// error (never a silent "nothing approved"); a missing one approves nothing, logged.
func FromConfig(cfg *config.Config, log zerolog.Logger, report func(Event)) (*Vetter, error) {
	if !Configured(cfg) {
		return nil, nil
	}
	opts := Options{
		Pin:           PinMode(cfg.Proxy.Pin),
		LockPath:      cfg.Proxy.LockFile,
		DefaultScreen: ScreenMode(cfg.Proxy.Screen),
		Screen:        map[string]ScreenMode{},
		Allow:         allowancesOf(cfg),
		Log:           log,
		Report:        report,
	}
	for _, u := range cfg.Upstreams {
		if u.Screen != "" {
			opts.Screen[u.Name] = ScreenMode(u.Screen)
		}
	}
	v := New(opts)
	if opts.Pin == PinOff {
		return v, nil
	}
	l, err := ReadLock(cfg.Proxy.LockFile)
	switch {
	case IsNotExist(err):
		ev := log.Warn()
		if opts.Pin == PinEnforce {
			ev = log.Error()
		}
		ev.Str("lock_file", cfg.Proxy.LockFile).Str("pin", cfg.Proxy.Pin).
			Msg("the lock file does not exist: no definition is approved (pin = \"enforce\" withholds them all); write it with mcp-proxy lock")
		v.SetLock(nil, nil)
	case err != nil:
		return nil, fmt.Errorf("reading the lock file: %w", err)
	default:
		v.SetLock(l, nil)
	}
	return v, nil
}

// Reread reads the configuration's lock file again for a reload: changed reports whether
// its content differs from the lock in force. A missing file gives a nil lock; one that
// cannot be read is an error.
func (v *Vetter) Reread(cfg *config.Config) (l *Lock, changed bool, err error) {
	l, err = ReadLock(cfg.Proxy.LockFile)
	if err != nil && !IsNotExist(err) {
		return nil, false, fmt.Errorf("reading the lock file: %w", err)
	}
	return l, !sameLock(v.Lock(), l), nil
}

func sameLock(a, b *Lock) bool {
	if a == nil || b == nil {
		return a == b
	}
	ea, err1 := a.Encode()
	eb, err2 := b.Encode()
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

// CheckLockFile is what validate says of the lock file a pinning configuration reads: an
// error when it cannot be read as one, a warning when it is missing.
func CheckLockFile(cfg *config.Config) hcl.Diagnostics {
	if cfg.Proxy.Pin == config.PinOff {
		return nil
	}
	at := &hcl.Range{Filename: cfg.Filename, Start: hcl.Pos{Line: 1, Column: 1}}
	_, err := ReadLock(cfg.Proxy.LockFile)
	switch {
	case IsNotExist(err):
		what := "every definition is reported as not approved"
		if cfg.Proxy.Pin == config.PinEnforce {
			what = "every tool, prompt and resource template is withheld"
		}
		return hcl.Diagnostics{{Severity: hcl.DiagWarning, Subject: at, Summary: "No lock file",
			Detail: fmt.Sprintf("pin = %q and %s does not exist: %s until it is written with mcp-proxy lock.", cfg.Proxy.Pin, cfg.Proxy.LockFile, what)}}
	case err != nil:
		return hcl.Diagnostics{{Severity: hcl.DiagError, Subject: at, Summary: "Unreadable lock file", Detail: err.Error()}}
	}
	return nil
}
