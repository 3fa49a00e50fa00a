// Package server is mcp-proxy's front end: it speaks MCP to clients as one server. It owns
// client sessions (the legacy initialize handshake, version negotiation, the merged
// capabilities, serverInfo and instructions), answers ping locally, rejects what is not
// valid JSON-RPC with the right error, tracks each request so a client can cancel it, and
// hands everything else to the router.
//
// It decides neither routing nor policy.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// Options describes the proxy as clients see it.
type Options struct {
	Name         string // serverInfo.name
	Version      string // serverInfo.version
	Instructions string // prepended to the upstreams' merged instructions
	// ReadyTimeout bounds how long initialize (and a modern client's first requests)
	// waits for upstreams still starting (the configured ready_grace); 0 means 60s, and
	// a negative value does not wait. Upstreams that are not ready by then are left out
	// of the answer and join the catalogue (with list_changed) when they come up; a call
	// naming one of their tools meanwhile waits for them (see router.Options.StartWait).
	ReadyTimeout time.Duration
	// MaxMessage bounds one message from a client, in bytes; 0 means 64 MiB.
	MaxMessage int
	// Principal is who a stdio client is (policy and audit); nil for nobody in particular.
	Principal *principal.Principal
	// Observer is told when sessions open and close; nil for nobody.
	Observer SessionObserver
	// StateKey keys the HMAC of the requestState handles the proxy mints and wraps for
	// modern clients. Empty: a random key of this process's own. Replicas of one proxy
	// share a key, so that an upstream's requestState handed out by one is accepted by
	// another. At least router.MinKeyLen bytes; check it with CheckStateKey (New panics
	// on a shorter one).
	StateKey []byte
	// MaxClientBuffer caps the bytes a client session may leave unread (its stdout, or
	// its GET event stream); a client over it is disconnected, with a log line, so that it
	// neither holds memory nor stalls the upstreams and clients it shares. 0 means
	// DefaultMaxClientBuffer (see outbox).
	MaxClientBuffer int
	// MaxClientInFlight caps the requests one client session has in flight; more are
	// refused at once with -31006 (data.limit "max_client_in_flight"). 0 means
	// DefaultMaxClientInFlight; the stateless modern HTTP requests, which have no
	// session, are not counted.
	MaxClientInFlight int
	// Endpoint is the endpoint a stdio client is served (router.SetEndpoints); "": the
	// whole catalogue. The HTTP front end serves each endpoint on its own path
	// (HTTPOptions.Endpoints).
	Endpoint string
}

// Live is the part of Options a running server takes again (Reconfigure): it applies
// to what starts after the change (sessions opened, initialize answered, the grace a
// client's first request waits); sessions already open keep their buffer and in-flight
// caps.
type Live struct {
	Name, Version, Instructions        string
	ReadyTimeout                       time.Duration
	MaxClientBuffer, MaxClientInFlight int
}

// withDefaults is l with the defaults filled in.
func (l Live) withDefaults() *Live {
	if l.Name == "" {
		l.Name = "mcp-proxy"
	}
	if l.ReadyTimeout == 0 {
		l.ReadyTimeout = 60 * time.Second
	}
	return &l
}

// DefaultMaxClientInFlight is the default of Options.MaxClientInFlight.
const DefaultMaxClientInFlight = 1024

// CheckStateKey reports what is wrong with a StateKey: empty is fine (a random key per
// process), otherwise it must have at least router.MinKeyLen bytes. The wiring calls it,
// so that a bad configured key is an error rather than New's panic.
func CheckStateKey(key []byte) error {
	if len(key) > 0 && len(key) < router.MinKeyLen {
		return fmt.Errorf("state key: %d bytes, need at least %d (or none for a random key)", len(key), router.MinKeyLen)
	}
	return nil
}

// Server serves client sessions over one router.
type Server struct {
	r    *router.Router
	opts Options              // as New was given them; the Live fields are read from live
	live atomic.Pointer[Live] // the settings a reload may change (Reconfigure)
	log  zerolog.Logger

	startOnce sync.Once
	baseCtx   context.Context // lifetime of the upstreams the server starts

	states  stateKeys     // requestState handles of bridged calls
	callSeq atomic.Uint64 // ids of bridged calls
	clients atomic.Uint64 // router.ClientIDs of sessions and bridged calls
}

// nextClientID mints the router's identity of one client (a session, or a bridged
// modern call, whose input goes to that call alone).
func (s *Server) nextClientID() router.ClientID { return router.ClientID(s.clients.Add(1)) }

func (s *Server) nextCall() uint64 { return s.callSeq.Add(1) }

// New returns a server. It has no side effects. It panics when opts.StateKey is set but
// too short (see CheckStateKey): a programming error, since the wiring checks configured
// keys first and reports them as errors.
func New(r *router.Router, opts Options, log zerolog.Logger) *Server {
	if err := CheckStateKey(opts.StateKey); err != nil {
		panic("server.New: " + err.Error())
	}
	s := &Server{r: r, opts: opts, log: log, baseCtx: context.Background()}
	s.live.Store(Live{Name: opts.Name, Version: opts.Version, Instructions: opts.Instructions, ReadyTimeout: opts.ReadyTimeout,
		MaxClientBuffer: opts.MaxClientBuffer, MaxClientInFlight: opts.MaxClientInFlight}.withDefaults())
	return s
}

// Reconfigure takes new Live settings (a configuration reload), safely while serving.
func (s *Server) Reconfigure(l Live) { s.live.Store(l.withDefaults()) }

// Settings returns the Live settings in force (defaults filled in).
func (s *Server) Settings() Live { return *s.cur() }

// serverInfo is the serverInfo the proxy gives under l.
func serverInfo(l *Live) map[string]string {
	return map[string]string{"name": l.Name, "version": l.Version}
}

// cur is the Live settings in force.
func (s *Server) cur() *Live { return s.live.Load() }

// startUpstreams starts the upstreams on the first client's initialize, telling them
// the client capabilities the proxy can relay. Upstreams already started (by the caller,
// or earlier) keep running and take the capabilities at their next restart.
// legacy says that client speaks the legacy era.
func (s *Server) startUpstreams(caps json.RawMessage, legacy bool) {
	s.startOnce.Do(func() {
		s.r.SetClientCapabilities(caps)
		s.r.SetPreferLegacy(legacy)
		s.r.Start(s.baseCtx)
	})
}

// ServeStream serves one client session over a newline-delimited stream (the proxy's own
// stdin and stdout in stdio mode) until the input ends or ctx is cancelled. Requests still
// in flight then are cancelled upstream.
func (s *Server) ServeStream(ctx context.Context, in io.Reader, out io.Writer) error {
	s.baseCtx = ctx
	log := s.log.With().Str("session", "stdio").Logger()
	ctx, disconnect := context.WithCancelCause(ctx)
	defer disconnect(nil)
	ob := newOutbox(out, s.cur().MaxClientBuffer, func() {
		log.Error().Int("max_client_buffer", s.maxClientBuffer()).
			Msg("the client is not reading its stdout: more than max_client_buffer bytes unread; disconnecting it")
		disconnect(errClientStuck)
	})
	if f, ok := out.(*os.File); ok {
		ob.setRoom(pipeRoom(f)) // a pipe with room takes an answer from the goroutine that has it
	}
	sess := newSession(s, transport.NewStream(in, ob, s.opts.MaxMessage), log)
	sess.transport = TransportStdio
	sess.endpoint = s.opts.Endpoint
	sess.maxInFlight = s.maxClientInFlight()
	if s.opts.Principal != nil && principal.From(ctx) == nil {
		ctx = principal.With(ctx, s.opts.Principal) // the one user of a stdio front end
	}
	err := sess.serve(ctx)
	ob.Close(outboxDrain) // the last answers go out, unless the client reads nothing
	if cause := context.Cause(ctx); errors.Is(cause, errClientStuck) {
		return fmt.Errorf("stdio client: %w", cause)
	}
	return err
}

// outboxDrain bounds how long a closing session waits for its unwritten output.
const outboxDrain = 5 * time.Second

func (s *Server) maxClientBuffer() int {
	if n := s.cur().MaxClientBuffer; n > 0 {
		return n
	}
	return DefaultMaxClientBuffer
}

func (s *Server) maxClientInFlight() int {
	if n := s.cur().MaxClientInFlight; n > 0 {
		return n
	}
	return DefaultMaxClientInFlight
}

// capabilities merges the ready upstreams' declared capabilities into the proxy's own
// (see mcp.MergeServerCapabilities).
func (s *Server) capabilities() json.RawMessage { return s.capabilitiesFor("") }

// capabilitiesFor is capabilities for a client of endpoint ("": none): the capabilities
// of the upstreams it serves, and tools with listChanged (the proxy announces what a
// reload or a search changes in its list) and filtering (SEP-1821: its tools/list takes
// a query).
func (s *Server) capabilitiesFor(endpoint string) json.RawMessage {
	var all []json.RawMessage
	var ep router.EndpointInfo
	if endpoint != "" {
		var ok bool
		if ep, ok = s.r.Endpoint(endpoint); !ok {
			return json.RawMessage("{}") // removed by a reload: it serves nothing
		}
	}
	for _, st := range s.r.Upstreams() {
		if endpoint != "" && !slices.Contains(ep.Upstreams, st.Name) {
			continue
		}
		all = append(all, st.Info.Capabilities)
	}
	if !s.r.Settled() {
		// An upstream still starting may bring any of the lists: offer them all (with
		// listChanged), so that the client listens for the list_changed announcing them.
		all = append(all, startingCapabilities)
	}
	if endpoint != "" && ep.Search {
		all = append(all, searchCapabilities)
	}
	merged := mcp.MergeServerCapabilities(all)
	if endpoint == "" {
		return merged
	}
	if tools, ok, _ := jsonx.Get(merged, "tools"); ok && len(tools) > 0 && tools[0] == '{' {
		tools, _ = jsonx.Edit(tools, []jsonx.Change{{Key: "listChanged", Value: []byte("true")}, {Key: "filtering", Value: []byte("true")}})
		if out, err := jsonx.Set(merged, "tools", tools); err == nil {
			merged = out
		}
	}
	return merged
}

// searchCapabilities are what an endpoint in search mode offers whatever its upstreams:
// tools (search_tools, call_tool).
var searchCapabilities = json.RawMessage(`{"tools":{"listChanged":true}}`)

// startingCapabilities stands for the upstreams still starting in capabilities.
var startingCapabilities = json.RawMessage(`{"tools":{},"prompts":{},"resources":{}}`)

// awaitStart waits, up to ReadyTimeout (the ready grace), for the upstreams' first start
// attempts; doing names what is about to be served, for the log.
func (s *Server) awaitStart(ctx context.Context, log *zerolog.Logger, doing string) {
	if s.r.Settled() {
		return
	}
	var err error
	grace := s.cur().ReadyTimeout
	if grace > 0 {
		wctx, cancel := context.WithTimeout(ctx, grace)
		err = s.r.WaitReady(wctx)
		cancel()
	}
	if starting := s.r.Starting(); len(starting) > 0 {
		log.Info().Strs("starting", starting).Dur("ready_grace", max(grace, 0)).
			Msg(doing + " while some upstreams are still starting; list_changed announces their items when they are ready")
	} else if err != nil {
		log.Warn().Err(err).Msg(doing + " while some upstreams failed to start")
	}
}

// instructions merges the configured text with each upstream's instructions, each under
// the upstream's name, in config order.
func (s *Server) instructions() string { return s.instructionsFor("") }

// instructionsFor is instructions for a client of endpoint ("": none): the endpoint's
// own text (the configured one when it has none), then the instructions of the
// upstreams it serves.
func (s *Server) instructionsFor(endpoint string) string {
	var parts []string
	ins := s.cur().Instructions
	var ep router.EndpointInfo
	if endpoint != "" {
		var ok bool
		if ep, ok = s.r.Endpoint(endpoint); !ok {
			return ""
		}
		if ep.Instructions != nil {
			ins = *ep.Instructions
		}
	}
	if ins != "" {
		parts = append(parts, ins)
	}
	for _, st := range s.r.Upstreams() {
		if endpoint != "" && !slices.Contains(ep.Upstreams, st.Name) {
			continue
		}
		if ins := strings.TrimSpace(st.Info.Instructions); ins != "" {
			head := "## " + st.Name
			if st.Namespace != "" {
				head += " (names prefixed " + st.Namespace + ")"
			}
			parts = append(parts, head+"\n\n"+ins)
		}
	}
	return strings.Join(parts, "\n\n")
}
