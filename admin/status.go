package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

type routerStatus = router.UpstreamStatus

// Status is what /status says, in JSON as in HTML, and what `mcp-proxy status` prints.
type Status struct {
	Version  string   `json:"version"`
	Ready    bool     `json:"ready"`
	NotReady []string `json:"not_ready,omitempty"` // required upstreams that are not ready
	// Waiting are required upstreams not started yet: they start with the first client
	// (whose initialize waits for them), so the proxy counts as ready meanwhile.
	Waiting []string   `json:"waiting,omitempty"`
	Now     time.Time  `json:"now"`
	Started time.Time  `json:"started"`
	Config  ConfigInfo `json:"config"`
	// LastReload is the outcome of the last reload of the configuration; nil before any.
	LastReload *Reload                `json:"last_reload,omitempty"`
	Upstreams  []UpstreamStatus       `json:"upstreams"`
	Sessions   []metrics.SessionCount `json:"sessions"`
	// Trust is what pinning and screening decided of the upstreams' definitions (see
	// package trust); nil when the proxy does not pin or screen.
	Trust any `json:"trust,omitempty"`
	// Endpoints are the endpoint blocks, each with its catalogue; none without any.
	Endpoints []EndpointStatus `json:"endpoints,omitempty"`
}

// EndpointStatus is one endpoint in Status: where it is served and its catalogue (in
// search mode, every tool its search may find).
type EndpointStatus struct {
	Name      string   `json:"name"`
	Path      string   `json:"path,omitempty"` // HTTP: Streamable HTTP; the HTTP+SSE stream is Path+"/sse"
	Mode      string   `json:"mode"`           // all or search
	Upstreams []string `json:"upstreams"`
	Always    []string `json:"always,omitempty"`
	Tools     []string `json:"tools"` // exposed names, in catalogue order
}

// UpstreamStatus is one upstream in Status.
type UpstreamStatus struct {
	Name string `json:"name"`
	// State is one of metrics.States ("waiting": not started, until the first client),
	// or "disabled".
	State     string `json:"state"`
	Ready     bool   `json:"ready"`
	Required  bool   `json:"required"`
	Transport string `json:"transport"`
	// Era is "legacy" or "modern" once the upstream has spoken; ProtocolVersion its
	// negotiated version.
	Era             string `json:"era,omitempty"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
	Tools           int    `json:"tools"`
	Prompts         int    `json:"prompts"`
	Resources       int    `json:"resources"`
	Templates       int    `json:"resource_templates"`
	Restarts        uint64 `json:"restarts"`
	// LastStart is when it last became ready; LastError the error of its last exit or
	// failed start (kept after it is up again), and when.
	LastStart   *time.Time `json:"last_start,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	InFlight    int64      `json:"in_flight"`
	// Calls, P50Ms and P99Ms are the calls that ended in the last minutes (see
	// metrics.Options.Window) and their latency as clients saw it; zero without calls.
	Calls     uint64  `json:"calls"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	PerClient bool    `json:"per_client,omitempty"`
	Sessions  int     `json:"sessions,omitempty"` // per-client (or per-principal) upstream sessions open
	// PerPrincipal: one upstream session per principal. CredentialMode is the
	// upstream's per-user credentials mode (docs/credentials.md), and Principals how many
	// principals have a credential for it in the token store now.
	PerPrincipal   bool   `json:"per_principal,omitempty"`
	CredentialMode string `json:"credential_mode,omitempty"`
	Principals     *int   `json:"principals_with_credential,omitempty"`
}

// StateDisabled is the state of an upstream whose block says disabled = true.
const StateDisabled = "disabled"

// Status reads the running proxy's status now.
func (s *Server) Status() *Status {
	now := s.opts.Now()
	s.live.Lock()
	cfgInfo, confs, last := s.opts.Config, s.opts.Upstreams, s.lastReload
	s.live.Unlock()
	st := &Status{Version: s.opts.Version, Now: now, Started: s.started, Config: cfgInfo, LastReload: last,
		Sessions: s.opts.Metrics.Sessions(), Ready: true}
	if st.Sessions == nil {
		st.Sessions = []metrics.SessionCount{}
	}
	if s.opts.Trust != nil {
		st.Trust = s.opts.Trust()
	}
	var creds map[string]CredentialSummary
	if s.opts.Credentials != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		creds = s.opts.Credentials.Summary(ctx)
		cancel()
	}
	running := map[string]int{}
	ups := s.opts.Engine.Upstreams()
	for i, u := range ups {
		running[u.Name] = i
	}
	sizes := map[string]int{}
	zs := s.opts.Engine.Sizes()
	for i, z := range zs {
		sizes[z.Upstream] = i
	}
	for _, c := range upstreamConfigs(confs, ups) {
		us := UpstreamStatus{Name: c.Name, Required: c.Required, Transport: c.Transport, State: StateDisabled}
		i, ok := running[c.Name]
		if !c.Disabled && ok {
			r := ups[i]
			v := s.opts.Metrics.Upstream(c.Name)
			us.Ready = r.State == upstream.StateReady
			us.State = stateOf(r.State, v.State)
			if r.Info.ProtocolVersion != "" {
				us.ProtocolVersion, us.Era = r.Info.ProtocolVersion, metrics.EraLegacy
				if r.Info.Modern {
					us.Era = metrics.EraModern
				}
			}
			if j, ok := sizes[c.Name]; ok {
				us.Tools, us.Prompts, us.Resources, us.Templates = zs[j].Tools, zs[j].Prompts, zs[j].Resources, zs[j].Templates
			}
			us.Restarts, us.InFlight = v.Restarts, v.InFlight
			if !v.LastReady.IsZero() {
				t := v.LastReady
				us.LastStart = &t
			}
			us.LastError = v.LastError
			if !v.LastErrorAt.IsZero() {
				t := v.LastErrorAt
				us.LastErrorAt = &t
			}
			if us.LastError == "" && r.Err != nil {
				us.LastError = r.Err.Error()
			}
			us.Calls = v.Latency.Count
			us.P50Ms, us.P99Ms = ms(v.Latency.P50), ms(v.Latency.P99)
			us.PerClient, us.Sessions, us.PerPrincipal = r.PerClient, r.Sessions, r.PerPrincipal
			if c, ok := creds[c.Name]; ok {
				n := c.Principals
				us.CredentialMode, us.Principals = c.Mode, &n
			}
		}
		switch {
		case !us.Required || us.Ready:
		case us.State == metrics.StateWaiting:
			// Not started: the upstreams start with the first client, whose initialize
			// waits for them. Not ready would keep that client away for good.
			st.Waiting = append(st.Waiting, us.Name)
		default:
			st.Ready = false
			st.NotReady = append(st.NotReady, us.Name)
		}
		st.Upstreams = append(st.Upstreams, us)
	}
	st.Endpoints = endpointStatus(s.opts.Engine)
	return st
}

// endpointer is an Engine with endpoints (the router).
type endpointer interface {
	Endpoints() []router.EndpointInfo
	EndpointTools(name string) ([]router.Tool, bool)
}

var _ endpointer = (*router.Router)(nil)

// endpointStatus describes the engine's endpoints; nil without any.
func endpointStatus(e Engine) []EndpointStatus {
	ep, ok := e.(endpointer)
	if !ok {
		return nil
	}
	var out []EndpointStatus
	for _, info := range ep.Endpoints() {
		es := EndpointStatus{Name: info.Name, Path: info.Path, Mode: "all", Upstreams: info.Upstreams, Always: info.Always, Tools: []string{}}
		if info.Search {
			es.Mode = "search"
		}
		if es.Upstreams == nil {
			es.Upstreams = []string{}
		}
		tools, _ := ep.EndpointTools(info.Name)
		for _, t := range tools {
			es.Tools = append(es.Tools, t.Name)
		}
		out = append(out, es)
	}
	return out
}

// upstreamConfigs is Options.Upstreams, or (without them) every running upstream as
// required.
func upstreamConfigs(confs []UpstreamConfig, ups []routerStatus) []UpstreamConfig {
	if len(confs) > 0 {
		return confs
	}
	out := make([]UpstreamConfig, len(ups))
	for i, u := range ups {
		out[i] = UpstreamConfig{Name: u.Name, Required: true}
	}
	return out
}

// stateOf is the state shown for an upstream: the router's, refined by its event
// history (whether it is waiting to restart, or down before that).
func stateOf(st upstream.State, seen string) string {
	switch st {
	case upstream.StateReady:
		return metrics.StateUp
	case upstream.StateStopped:
		return metrics.StateStopped
	case upstream.StateStarting:
		if seen == metrics.StateRestarting || seen == metrics.StateWaiting {
			return seen
		}
		return metrics.StateStarting
	}
	if seen == metrics.StateRestarting || seen == metrics.StateDown {
		return seen
	}
	return metrics.StateDown
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// wantsJSON reports whether a /status request asks for JSON.
func wantsJSON(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "json":
		return true
	case "html":
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	st := s.Status()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Add("Vary", "Accept")
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, st)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	if err := statusPage().Execute(w, pageOf(st)); err != nil {
		s.opts.Log.Warn().Err(err).Msg("admin: writing the status page")
	}
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte("ok\n"))
}

// readiness is the body of /readyz.
type readiness struct {
	Ready    bool     `json:"ready"`
	Draining bool     `json:"draining,omitempty"` // the proxy is shutting down
	NotReady []string `json:"not_ready,omitempty"`
	Waiting  []string `json:"waiting,omitempty"` // not started until the first client
}

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	st := s.Status()
	body := readiness{Ready: st.Ready && !s.draining.Load(), Draining: s.draining.Load(), NotReady: st.NotReady, Waiting: st.Waiting}
	code := http.StatusOK
	if !body.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
