package server

import (
	"net"
	"strings"
)

func (h *HTTPHandler) hostAllowed(host string) bool {
	if !h.opts.Loopback {
		return true
	}
	name := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		name = hn
	}
	name = trimBrackets(name)
	return name == "localhost" || name == "127.0.0.1" || name == "::1"
}

// trimBrackets is strings.Trim(s, "[]") without building a character set per call (a
// cost on every request).
func trimBrackets(s string) string {
	for len(s) > 0 && (s[0] == '[' || s[0] == ']') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == '[' || s[len(s)-1] == ']') {
		s = s[:len(s)-1]
	}
	return s
}

func (h *HTTPHandler) originAllowed(origin string) bool {
	patterns := h.opts.AllowedOrigins
	if len(patterns) == 0 {
		patterns = []string{"http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*", "https://localhost:*"}
	}
	for _, p := range patterns {
		if p == "*" || p == origin {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, ":*"); ok {
			if origin == prefix || strings.HasPrefix(origin, prefix+":") {
				return true
			}
		}
	}
	return false
}
