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
	name = strings.Trim(name, "[]")
	return name == "localhost" || name == "127.0.0.1" || name == "::1"
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
