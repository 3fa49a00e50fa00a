package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Outcomes of a reload.
const (
	ReloadApplied   = "applied"   // the new configuration runs (RestartRequired may list what it could not change)
	ReloadUnchanged = "unchanged" // the file says what already runs
	ReloadRejected  = "rejected"  // the file is invalid, or part of it could not start: the old configuration runs on
)

// Reload is the outcome of one configuration reload: what /reload answers, what the
// status shows of the last one, and what `mcp-proxy reload` prints.
type Reload struct {
	Trigger string    `json:"trigger"` // "signal" (SIGHUP), "watch" (the file changed) or "admin" (POST /reload)
	Outcome string    `json:"outcome"` // ReloadApplied, ReloadUnchanged or ReloadRejected
	At      time.Time `json:"at"`
	TookMs  float64   `json:"took_ms"`
	SHA256  string    `json:"sha256,omitempty"` // of the file read
	// Errors say why a rejected reload was rejected: the file's diagnostics at
	// file:line, or what failed to start.
	Errors []string `json:"errors,omitempty"`
	// Changes are what was applied ("upstream added: x", "policy", …).
	Changes []string `json:"changes,omitempty"`
	// RestartRequired are settings that changed but cannot change live (a listen
	// address): the running values stay until the proxy restarts.
	RestartRequired []string `json:"restart_required,omitempty"`
}

// Summary is the reload in one line.
func (r *Reload) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s, %s)", r.Outcome, r.Trigger, r.At.Local().Format(time.DateTime))
	if len(r.Changes) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(r.Changes, "; "))
	}
	if len(r.RestartRequired) > 0 {
		fmt.Fprintf(&b, "; needs a restart: %s", strings.Join(r.RestartRequired, ", "))
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(r.Errors, "; "))
	}
	return b.String()
}

// SetUpstreams replaces the configured upstreams the status and readiness go by (a
// reload added or removed some).
func (s *Server) SetUpstreams(ups []UpstreamConfig) {
	s.live.Lock()
	s.opts.Upstreams = ups
	s.live.Unlock()
}

// SetConfig records which configuration runs now, and the outcome of the reload that
// loaded it or was refused (nil for none).
func (s *Server) SetConfig(info ConfigInfo, last *Reload) {
	s.live.Lock()
	s.opts.Config = info
	if last != nil {
		l := *last
		s.lastReload = &l
	}
	s.live.Unlock()
}

// SetLastReload records the outcome of a reload that did not change what runs.
func (s *Server) SetLastReload(last *Reload) {
	s.live.Lock()
	l := *last
	s.lastReload = &l
	s.live.Unlock()
}

// serveReload runs Options.Reload for POST /reload and answers its outcome: 200 when
// applied or unchanged, 422 when rejected.
func (s *Server) serveReload(w http.ResponseWriter, r *http.Request) {
	if s.opts.Reload == nil {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "this proxy cannot reload its configuration"})
		return
	}
	out := s.opts.Reload(r.Context())
	status := http.StatusOK
	if out.Outcome == ReloadRejected {
		status = http.StatusUnprocessableEntity
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, out)
}

// PostReload asks the admin listener at baseURL to reload the configuration and
// returns the outcome (Outcome ReloadRejected, with its errors, when the new file was
// refused); token as for Fetch.
func PostReload(ctx context.Context, client *http.Client, baseURL, token string) (*Reload, error) {
	base := strings.TrimSuffix(baseURL, "/")
	status, body, err := exchange(ctx, client, http.MethodPost, baseURL, "/reload", token, 4<<20)
	if err != nil {
		return nil, fmt.Errorf("asking %s to reload: %w", baseURL, err)
	}
	if status != http.StatusOK && status != http.StatusUnprocessableEntity {
		return nil, fmt.Errorf("%s/reload answered %d %s: %s", base, status, http.StatusText(status), firstLine(string(body)))
	}
	var out Reload
	if err := json.Unmarshal(body, &out); err != nil || out.Outcome == "" {
		return nil, fmt.Errorf("the answer of %s/reload is not what mcp-proxy serves: %s", base, firstLine(string(body)))
	}
	return &out, nil
}

// serveApprove approves the definitions the upstreams list now (POST /lock, optionally
// ?upstream=NAME, repeated): they are written to the lock file and served. 404 when the
// proxy does not pin; 400 for an upstream that cannot be approved.
func (s *Server) serveApprove(w http.ResponseWriter, r *http.Request) {
	if s.opts.Approve == nil {
		http.Error(w, "this proxy does not pin definitions (proxy { pin = \"warn\" | \"enforce\" })", http.StatusNotFound)
		return
	}
	st, err := s.opts.Approve(r.URL.Query()["upstream"])
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(st)
}
