// Package admin is the proxy's admin listener: an HTTP server of its own, separate from
// the MCP endpoint and served in stdio and HTTP mode alike, for the people and programs
// that operate the proxy. It serves
//
//   - /metrics: the Prometheus registry of package metrics;
//   - /healthz: 200 while the process serves;
//   - /readyz: 200 while every required upstream is ready, else 503 with a JSON body
//     naming those that are not (for load balancers and Kubernetes probes);
//   - /status: each upstream's state, transport, era, catalogue, restarts, last error
//     and recent latency, the client sessions, and the configuration's file, hash and
//     load time: JSON (Accept: application/json, or ?format=json) or a plain
//     server-rendered HTML page (no script).
//
// It also holds the client side of /status that `mcp-proxy status` uses (Fetch,
// WriteText), so that the page, the JSON and the terminal table come from one Status.
//
// It reads the proxy through small interfaces (Engine) and package metrics, and must not
// sit on the request path: nothing here runs per MCP call. It authenticates nobody
// itself: Options.Auth, when set, is the front end's authenticator; what it decides is
// what each authenticated principal may do (access.go: the admin groups administer
// everything, every other principal only its own credentials). The probes (/healthz,
// /readyz) are always open, since load balancers and kubelets probe without
// credentials; they reveal no more than upstream names.
package admin

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Engine is what the admin listener reads of the running proxy: the router does.
type Engine interface {
	Upstreams() []router.UpstreamStatus
	Sizes() []router.Sizes
}

var _ Engine = (*router.Router)(nil)

// UpstreamConfig is one upstream block as configured.
type UpstreamConfig struct {
	Name      string
	Transport string // TransportStdio, or an HTTP upstream's transport setting
	Required  bool   // readiness waits for it
	Disabled  bool   // not started; listed as such
}

// Transports of an upstream, as the status names them.
const (
	TransportStdio          = "stdio"           // a child process (or a dialled link)
	TransportHTTP           = "http"            // a URL, Streamable HTTP or HTTP+SSE as found (transport = "auto")
	TransportStreamableHTTP = "streamable-http" // a URL, Streamable HTTP only
	TransportSSE            = "sse"             // a URL, legacy HTTP+SSE only
)

// ConfigInfo says which configuration runs.
type ConfigInfo struct {
	Path     string    `json:"path"`
	SHA256   string    `json:"sha256"` // of the file's bytes, hex
	LoadedAt time.Time `json:"loaded_at"`
}

// Options configures the admin listener.
type Options struct {
	// Address is host:port to listen on ("127.0.0.1:0" picks a free port).
	Address string
	// Auth, when set, wraps every endpoint but the probes (the front end's
	// authenticator: the same API keys and JWTs as the MCP endpoint), and puts the
	// principal in the request's context. Nil: no credentials asked, and whoever reaches
	// the listener is the operator, who may do everything.
	Auth func(http.Handler) http.Handler
	// Groups, with Auth, are the admin groups: their members may do everything, any
	// other principal only list, revoke and set its own credentials. Nil: any principal
	// may also read the status and metrics, reload and lock (see access.go).
	Groups []string
	// Engine is the running router; Metrics the proxy's metrics. Both required.
	Engine  Engine
	Metrics *metrics.Metrics
	// Upstreams are the configured upstreams in file order, disabled ones included.
	Upstreams []UpstreamConfig
	Config    ConfigInfo
	Version   string // the proxy's build version
	Log       zerolog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Reload, when set, reloads the configuration for POST /reload (behind Auth, like
	// /status) and returns the outcome.
	Reload func(ctx context.Context) *Reload
	// Trust, when set, is the pinning and screening status /status shows (trust.Status).
	Trust func() any
	// Approve, when set, approves what the named upstreams (all when none) list now in the
	// lock file, for POST /lock (behind Auth, like /reload), and returns the new status.
	Approve func(upstreams []string) (any, error)
	// Credentials, when set, lists and revokes the principals' per-user credentials, for
	// GET /credentials, POST /credentials/revoke and PUT /credentials/secret (behind
	// Auth: an administrator's for anyone, any other principal's for itself only); it
	// never shows a token.
	Credentials Credentials
}

// Server is the admin listener. Make it with New; Start listens and serves until
// Close.
type Server struct {
	opts    Options
	started time.Time
	handler http.Handler

	mu   sync.Mutex // guards srv, ln, done and closed
	srv  *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve returns
	err  error         // what Serve returned, other than http.ErrServerClosed

	closed bool

	draining atomic.Bool // see Drain

	live       sync.Mutex // guards opts.Upstreams, opts.Config and lastReload, which reloads change
	lastReload *Reload
}

// New returns an admin listener that is not listening yet. It has no side effects.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, started: opts.Now()}
	s.handler = s.routes()
	return s
}

// routes is the admin listener's mux.
func (s *Server) routes() http.Handler {
	guard := func(h http.Handler) http.Handler {
		if s.opts.Auth != nil {
			return s.opts.Auth(h)
		}
		return h
	}
	op := func(h http.Handler) http.Handler { return guard(s.operator(h)) } // administrators only, with admin groups
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", op(promhttp.HandlerFor(s.opts.Metrics.Registry(), promhttp.HandlerOpts{
		ErrorLog: stdlog.New(s.opts.Log.With().Str("component", "admin").Logger(), "", 0),
	})))
	mux.Handle("GET /status", op(http.HandlerFunc(s.serveStatus)))
	mux.Handle("POST /reload", op(http.HandlerFunc(s.serveReload)))
	mux.Handle("POST /lock", op(http.HandlerFunc(s.serveApprove)))
	// Each principal's own credentials, or anyone's for an administrator (access.go).
	mux.Handle("GET /credentials", guard(http.HandlerFunc(s.serveCredentials)))
	mux.Handle("POST /credentials/revoke", guard(http.HandlerFunc(s.serveRevoke)))
	mux.Handle("PUT /credentials/secret", guard(http.HandlerFunc(s.serveSetSecret)))
	mux.HandleFunc("GET /healthz", s.serveHealth)
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.Handle("GET /{$}", op(http.RedirectHandler("/status", http.StatusFound)))
	return mux
}

// Handler is the admin listener's HTTP handler (what Start serves), for tests and for
// mounting elsewhere.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on Options.Address and serves in a goroutine of its own until Close.
// It returns the listening error, if any; calling it again, or after Close, is an error.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.srv != nil {
		return errors.New("admin: already started or closed")
	}
	ln, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: stdlog.New(s.opts.Log.With().Str("component", "admin").Logger(), "", 0)}
	s.done = make(chan struct{})
	srv, done := s.srv, s.done
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			s.opts.Log.Error().Err(err).Msg("admin listener stopped")
		}
	}()
	s.opts.Log.Info().Str("address", ln.Addr().String()).Msg("admin listener serving /metrics, /healthz, /readyz, /status")
	return nil
}

// Drain makes /readyz answer 503 from now on (with "draining": true), whatever the
// upstreams: call it when the proxy begins to shut down, so that load balancers stop
// sending it new work while requests in flight finish.
func (s *Server) Drain() { s.draining.Store(true) }

// Addr is the address the listener is bound to ("" before Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops the listener: no new connection is accepted, requests in flight get up
// to 5 s, then every connection is closed. It waits for the serving goroutine and
// returns what made it stop early, if anything. Safe twice, and before or without Start.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, srv.Close())
	}
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.err)
}
