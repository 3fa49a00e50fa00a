package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// decodeProxies turns the proxy blocks into a Proxy. Zero blocks give all
// defaults; every block is decoded and validated so that problems in a
// duplicate are reported too, but only the first one is used.
func decodeProxies(e *evaluator, blocks []rawProxy) Proxy {
	if len(blocks) == 0 {
		return defaultProxy()
	}
	for i := 1; i < len(blocks); i++ {
		e.diags = append(e.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Duplicate proxy block",
			Detail: fmt.Sprintf("Only one proxy block is allowed; the first one is at %s.",
				position(blocks[0].DefRange)),
			Subject: blocks[i].DefRange.Ptr(),
		})
	}
	p := decodeProxy(e, &blocks[0])
	for i := 1; i < len(blocks); i++ {
		decodeProxy(e, &blocks[i])
	}
	return p
}

// Defaults is the configuration of a file with no blocks but upstream blocks, less
// them: the proxy block's defaults and nothing else (no upstream, no listen block: stdio).
// A program that adds upstreams of its own (package proxy) starts from it.
func Defaults() *Config {
	return &Config{Proxy: defaultProxy()}
}

// defaultProxy is the Proxy used when the file has no proxy block.
func defaultProxy() Proxy {
	return Proxy{
		Name:          DefaultName,
		Separator:     DefaultSeparator,
		PageSize:      DefaultPageSize,
		MaxNameLength: DefaultMaxNameLength,

		MaxClientBuffer:   DefaultMaxClientBuffer,
		MaxClientInFlight: DefaultMaxClientInFlight,
		ReadyGrace:        DefaultReadyGrace,

		Pin:    PinOff,
		Screen: ScreenFlag,
	}
}

// decodeProxy evaluates, defaults and validates one proxy block.
func decodeProxy(e *evaluator, raw *rawProxy) Proxy {
	p := defaultProxy()

	if s, ok := e.string(raw.Name); ok {
		if s == "" {
			e.errorf(raw.Name, "Invalid proxy name",
				"\"name\" must not be empty; omit it to use %q.", DefaultName)
		} else {
			p.Name = s
		}
	}
	if s, ok := e.string(raw.Version); ok {
		p.Version = s
	}
	if s, ok := e.string(raw.Principal); ok {
		p.Principal = s
	}
	if b, ok := e.bool(raw.Watch); ok {
		p.Watch = b
	}
	if list, ok := e.stringList(raw.Groups); ok {
		p.PrincipalGroups = list
	}
	if s, ok := e.string(raw.Instructions); ok {
		p.Instructions = s
	}
	if s, ok := e.string(raw.Separator); ok {
		if msg := checkSeparator(s); msg != "" {
			e.errorf(raw.Separator, "Invalid separator", "%s", msg)
		} else {
			p.Separator = s
		}
	}
	if n, ok := e.int(raw.PageSize); ok {
		if n < minPageSize || n > maxPageSize {
			e.errorf(raw.PageSize, "Invalid page_size",
				"\"page_size\" must be between %d and %d, got %d.", minPageSize, maxPageSize, n)
		} else {
			p.PageSize = n
		}
	}
	if n, ok := e.int(raw.MaxNameLength); ok {
		if n < minMaxNameLength || n > maxMaxNameLength {
			e.errorf(raw.MaxNameLength, "Invalid max_name_length",
				"\"max_name_length\" must be between %d and %d, got %d.", minMaxNameLength, maxMaxNameLength, n)
		} else {
			p.MaxNameLength = n
		}
	}
	if n, ok := e.int(raw.MaxClientBuffer); ok {
		if n < minMaxClientBuffer {
			e.errorf(raw.MaxClientBuffer, "Invalid max_client_buffer",
				"\"max_client_buffer\" must be at least %d bytes, got %d.", minMaxClientBuffer, n)
		} else {
			p.MaxClientBuffer = n
		}
	}
	if n, ok := e.int(raw.MaxClientInFlight); ok {
		if n < 1 {
			e.errorf(raw.MaxClientInFlight, "Invalid max_client_in_flight",
				"\"max_client_in_flight\" must be at least 1, got %d.", n)
		} else {
			p.MaxClientInFlight = n
		}
	}
	if d, ok := e.durationOrZero(raw.ReadyGrace); ok {
		p.ReadyGrace = d
	}
	if s, ok := e.oneOf(raw.Pin, "pin", PinOff, PinWarn, PinEnforce); ok {
		p.Pin = s
	}
	if s, ok := e.string(raw.LockFile); ok {
		if s == "" {
			e.errorf(raw.LockFile, "Invalid lock_file", "\"lock_file\" must not be empty; omit it to use %s next to the configuration file.", DefaultLockFile)
		} else {
			p.LockFile = s // made absolute by Load, against the file's directory
		}
	}
	if s, ok := e.oneOf(raw.Screen, "screen", ScreenOff, ScreenFlag, ScreenWithhold); ok {
		p.Screen = s
	}
	p.ScreenAllow = decodeScreenAllow(e, raw.ScreenAllow)
	return p
}

// oneOf evaluates a string attribute that must be one of the given values; an error
// naming them otherwise.
func (e *evaluator) oneOf(attr *hcl.Attribute, name string, values ...string) (string, bool) {
	s, ok := e.string(attr)
	if !ok {
		return "", false
	}
	for _, v := range values {
		if s == v {
			return s, true
		}
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = fmt.Sprintf("%q", v)
	}
	e.errorf(attr, "Invalid "+name, "%q must be one of %s, got %q.", name, strings.Join(quoted, ", "), s)
	return "", false
}

// checkSeparator returns why s is not a usable separator, or "" if it is.
func checkSeparator(s string) string {
	if n := len(s); n < minSeparatorLen || n > maxSeparatorLen {
		return fmt.Sprintf("\"separator\" must be %d to %d characters long, got %q.", minSeparatorLen, maxSeparatorLen, s)
	}
	for _, r := range s {
		if !isNameChar(r) && r != '.' {
			return fmt.Sprintf("\"separator\" may only contain %s; %q contains %q.", separatorCharsDesc, s, r)
		}
	}
	return ""
}

// isNameChar reports whether r is in [A-Za-z0-9_-], the upstream label
// alphabet. Namespaces and separators also allow '.'.
func isNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}
