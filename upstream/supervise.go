package upstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/mcp-proxy/mcp-proxy/transport"
)

// stableAfter is how long a child must stay up for the restart backoff to reset even
// if it answered nothing.
const stableAfter = time.Minute

// supervise starts the child and restarts it with exponential backoff until ctx ends.
//
// The backoff protects against crash loops: a child that cannot start, or that dies
// before it has done any work, is retried ever more slowly. A child that became ready
// and then answered at least one call is not in a crash loop: its configuration,
// binary and handshake are known to work, and its death came from outside (kill -9, an
// OOM kill, one request that crashed it). Such an exit resets the backoff to BackoffMin,
// as staying up for stableAfter does, so repeated external faults each cost one short
// restart instead of an ever longer outage (four kills 2 s apart used to leave the
// upstream down most of the time). A child that crashes on every call it receives never
// answers one, so its backoff still grows; and a child that answers one call and then
// dies on the next is restarted at most once per call it is given, which is bounded by
// the work clients send, not a spin.
func (u *Upstream) supervise(ctx context.Context) {
	delay := u.spec.BackoffMin
	defer u.observe(Event{Kind: EventStopped})
	for {
		began := time.Now()
		u.observe(Event{Kind: EventStarting})
		c, err := u.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				u.setDown(nil, StateStopped)
				recoverClose(u.firstDone)
				return
			}
			u.log.Error().Err(err).Dur("retry_in", delay).Msg("upstream failed to start")
			u.observe(Event{Kind: EventStartFailed, Err: err})
			u.setDown(err, StateDown)
		} else {
			u.observe(Event{Kind: EventReady, Info: c.u.Info(), Duration: time.Since(began)})
			u.mu.Lock()
			u.restarts++
			u.mu.Unlock()
			recoverClose(u.firstDone)
			exitErr := u.serve(ctx, c)
			if ctx.Err() != nil {
				u.setDown(nil, StateStopped)
				return
			}
			served := c.answered.Load() - c.answeredAtReady
			if served > 0 || time.Since(began) > stableAfter {
				delay = u.spec.BackoffMin
			}
			u.log.Error().Err(exitErr).Int64("answered", served).Dur("retry_in", delay).Msg("upstream exited; restarting")
			u.observe(Event{Kind: EventExited, Err: exitErr})
			u.setDown(exitErr, StateDown)
		}
		recoverClose(u.firstDone)
		// Sleep with ±20% jitter so many upstreams do not restart in lockstep.
		sleep := time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
		u.observe(Event{Kind: EventRestarting, Backoff: sleep})
		select {
		case <-ctx.Done():
			u.setDown(nil, StateStopped)
			return
		case <-time.After(sleep):
		}
		delay = min(delay*2, u.spec.BackoffMax)
	}
}

// recoverClose closes ch unless it is already closed.
func recoverClose(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// connect spawns the child (or dials the URL), runs the handshake and fetches the
// catalogue, all within startup_timeout, and publishes the connection as ready.
func (u *Upstream) connect(ctx context.Context) (*conn, error) {
	sctx, cancel := context.WithTimeout(ctx, u.spec.StartupTimeout)
	defer cancel()
	c, info, cat, err := u.open(ctx, sctx)
	if errors.Is(err, errProbeUnanswered) && sctx.Err() == nil {
		// The child read the probe and said nothing: it may still answer it, so its
		// stdin can take no other handshake. A fresh process is offered initialize
		// first, and so is every later start.
		u.log.Info().Err(err).Msg("starting the upstream again, to offer it initialize first")
		u.probeUnanswered.Store(true)
		c, info, cat, err = u.open(ctx, sctx)
	}
	if err != nil {
		if errors.Is(sctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("not ready within startup_timeout %s: %w", u.spec.StartupTimeout, err)
		}
		if u.overHTTP() && u.spec.Transport == TransportAuto && u.httpKind() == "" && ctx.Err() == nil {
			// Not Streamable HTTP: try the legacy HTTP+SSE transport (2024-11-05).
			u.setHTTPKind(TransportSSE)
			c2, err2 := u.connect(ctx)
			if err2 == nil {
				return c2, nil
			}
			u.setHTTPKind("")
			return nil, fmt.Errorf("neither Streamable HTTP (%v) nor HTTP+SSE (%v)", err, err2)
		}
		return nil, err
	}
	if u.overHTTP() && u.httpKind() == "" {
		u.setHTTPKind(TransportStreamableHTTP) // the answer to auto, kept for restarts
	}
	u.mu.Lock()
	if u.state == StateStopped {
		u.mu.Unlock()
		c.fail(errors.New("upstream closed"))
		u.stopProcess(c.proc)
		return nil, ctx.Err()
	}
	c.answeredAtReady = c.answered.Load() // before any call can reach it: the handshake's and catalogue's answers
	u.cur, u.state, u.lastErr, u.info, u.catalogue = c, StateReady, nil, info, cat
	u.mu.Unlock()
	u.log.Info().Str("protocol_version", info.ProtocolVersion).Bool("modern", info.Modern).
		Int("tools", len(cat.Tools)).Int("prompts", len(cat.Prompts)).
		Int("resources", len(cat.Resources)).Int("templates", len(cat.Templates)).
		Msg("upstream ready")
	if info.Modern {
		c.subscribe(info)
	}
	u.events.Changed(u, AllKinds)
	return c, nil
}

// open starts one connection (a process, or an HTTP session) and runs the handshake and
// the first catalogue fetch within sctx; on failure the connection is closed again.
func (u *Upstream) open(ctx, sctx context.Context) (*conn, Info, *Catalogue, error) {
	proc, err := u.dial(sctx)
	if err != nil {
		return nil, Info{}, nil, err
	}
	c := newConn(ctx, u, proc)
	u.wg.Add(2)
	go func() {
		defer u.wg.Done()
		c.sweep()
	}()
	go func() {
		defer u.wg.Done()
		c.readLoop()
		// stdout closed: the child is gone or going. Give it a moment to be reaped so
		// the error names its exit status, then fail what is in flight.
		select {
		case <-proc.Done():
		case <-time.After(time.Second):
		}
		c.fail(u.exitError(proc))
	}()

	info, err := c.handshake(sctx)
	var cat *Catalogue
	if err == nil {
		var ferr error
		cat, ferr = c.fetch(sctx, info, &Catalogue{}, AllKinds)
		if ferr != nil {
			if sctx.Err() != nil {
				err = fmt.Errorf("fetching catalogue: %w", ferr)
			} else {
				u.log.Warn().Err(ferr).Msg("part of the upstream's catalogue could not be fetched")
			}
		}
	}
	if err != nil {
		c.fail(err)
		u.stopProcess(proc)
		return nil, Info{}, nil, err
	}
	return c, info, cat, nil
}

// dial opens the link of one start attempt: Spec.Dial's, or the child process, or the
// URL's. ctx bounds the dialling, not the link.
func (u *Upstream) dial(ctx context.Context) (transport.Link, error) {
	if u.spec.Dial != nil {
		l, err := u.spec.Dial(ctx)
		if err == nil && l == nil {
			err = errors.New("the dialler returned no link")
		}
		if err != nil {
			return nil, fmt.Errorf("dialling: %w", err)
		}
		return l, nil
	}
	env, headers := u.spec.Env, u.spec.Headers
	if u.spec.Prepare != nil {
		var err error
		if env, headers, err = u.spec.Prepare(ctx); err != nil {
			return nil, fmt.Errorf("preparing the start: %w", err)
		}
	}
	if u.spec.URL != "" {
		hs := transport.HTTPSpec{URL: u.spec.URL, Headers: headers, MaxMessage: u.spec.MaxMessage, OAuth: u.spec.OAuth,
			Authorizer: u.spec.Authorizer}
		if u.httpKind() == TransportSSE {
			return transport.DialSSE(hs, u.spec.StartupTimeout)
		}
		return transport.DialHTTP(hs), nil
	}
	return transport.StartProcess(transport.ProcessSpec{
		Command:    u.spec.Command,
		Env:        env,
		Dir:        u.spec.Dir,
		MaxMessage: u.spec.MaxMessage,
		Sandbox:    u.spec.Sandbox,
		Name:       u.spec.Name,
		Stderr: func(line string) {
			u.log.Info().Str("stderr", line).Msg("upstream stderr")
		},
	})
}

// serve waits until the connection dies or ctx ends; it returns why the child exited.
// Whichever way it ends, the link is stopped before serve returns: a child that died on
// its own still holds the proxy's end of its stdin (and an HTTP link its context) until
// Stop releases it.
func (u *Upstream) serve(ctx context.Context, c *conn) error {
	select {
	case <-c.proc.Done():
		// Seen before the end of its output when nobody was reading it at that moment
		// (the read role free, or a descendant holding stdout open).
		<-c.readerDone
		u.stopProcess(c.proc)
		return u.exitError(c.proc)
	case <-c.readerDone:
		// stdout closed while the process lives on: treat as dead and stop it.
		u.stopProcess(c.proc)
		return fmt.Errorf("upstream closed its stdout: %w", u.exitError(c.proc))
	case <-ctx.Done():
		u.mu.Lock()
		u.cur = nil
		u.mu.Unlock()
		c.fail(fmt.Errorf("%w: upstream %q is shutting down", ErrUnavailable, u.spec.Name))
		u.stopProcess(c.proc)
		<-c.readerDone
		return ctx.Err()
	}
}

func (u *Upstream) stopProcess(p transport.Link) {
	if err := p.Stop(u.spec.StopGrace); err != nil {
		u.log.Error().Err(err).Msg("stopping upstream process")
	}
}

func (u *Upstream) exitError(p transport.Link) error {
	select {
	case <-p.Done():
		if err := p.ExitErr(); err != nil {
			return fmt.Errorf("upstream %q exited: %w", u.spec.Name, err)
		}
		return fmt.Errorf("upstream %q exited", u.spec.Name)
	default:
		return fmt.Errorf("upstream %q closed its output", u.spec.Name)
	}
}

// setDown records that the upstream is not serving. An upstream that was serving and
// exited keeps its catalogue while it restarts: its items stay listed and routable, and
// a call to one is refused with the proxy's "unavailable" error (-31000, which a client
// may retry) rather than "Unknown tool", and clients are not sent two list changes per
// crash. The catalogue goes (and clients are told) when the restart fails or the
// upstream stops.
func (u *Upstream) setDown(err error, state State) {
	u.mu.Lock()
	keep := u.state == StateReady && state == StateDown
	u.cur = nil
	if u.state != StateStopped {
		u.state = state
	}
	if err != nil {
		u.lastErr = err
	}
	had := !u.catalogue.empty()
	if !keep {
		u.catalogue = &Catalogue{}
	}
	u.mu.Unlock()
	if had && !keep {
		u.events.Changed(u, AllKinds)
	}
}

// refresh re-fetches lists after a list_changed notification, coalescing bursts.
func (u *Upstream) refresh(kinds Kinds) {
	u.mu.Lock()
	c := u.cur
	u.mu.Unlock()
	if c == nil {
		return
	}
	if c.requestRefresh(kinds) {
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			c.refreshLoop()
		}()
	}
}

// overHTTP reports whether the upstream's links are HTTP ones: it has a URL and no
// Spec.Dial of its own.
func (u *Upstream) overHTTP() bool { return u.spec.Dial == nil && u.spec.URL != "" }

// HTTP transports of an upstream with a URL.
const (
	TransportAuto           = "auto"
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// httpKind is the HTTP transport in use: configured, or learned by the first probe.
func (u *Upstream) httpKind() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.spec.Transport != "" && u.spec.Transport != TransportAuto {
		return u.spec.Transport
	}
	return u.learnedKind
}

func (u *Upstream) setHTTPKind(k string) {
	u.mu.Lock()
	u.learnedKind = k
	u.mu.Unlock()
}
