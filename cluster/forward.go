package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// ForwardedHeader marks a request one replica forwarded to another, with the sender's
// replica id: a forwarded request is never forwarded again.
const ForwardedHeader = "Mcp-Proxy-Forwarded-By"

// OwnerHeader names, on a request Forward sends, the replica id the sender means to
// reach; a process at that address that is not that replica (a new process on the
// address of one that stopped or was killed, whose registry entry or cached address
// outlives it) answers 421 with NotOwnerHeader instead of serving the request, and the
// sender takes the replica for gone (and claims the session).
const OwnerHeader = "Mcp-Proxy-Owner"

// NotOwnerHeader is on the 421 answer of a replica that was sent a request meant for
// another (OwnerHeader), with its own id.
const NotOwnerHeader = "Mcp-Proxy-Not-Owner"

// Registry timings: a replica writes its address every heartbeatEvery with an expiry of
// registryTTL (every retryEvery while Redis does not answer, and at once when its Redis
// client has made a new connection); the others cache what they read for cacheFor.
//
// After Redis has lost the shared state (a restart without persistence), a replica that
// finds no hash for a session whose owner is gone waits up to awaitFor for the session's
// holder to write it again, when Redis lost it within recoverFor (or this replica's own
// registry entry is missing); so does one that does not find a task's hash, or the
// registry entry of the replica a parked call or a task names (recover.go).
const (
	heartbeatEvery = time.Second
	retryEvery     = 250 * time.Millisecond
	registryTTL    = 10 * time.Second
	cacheFor       = 5 * time.Second
	awaitFor       = 3 * time.Second
	awaitEvery     = 100 * time.Millisecond
	recoverFor     = 5 * time.Second
)

// Forwarder lets any replica take any request of a legacy session: the session is held
// by the replica that opened it (its owner, named by the session id's prefix), and a
// request that lands elsewhere is forwarded to the owner over HTTP, streamed both ways
// (docs/cluster.md says why the session is not rebuilt elsewhere instead).
//
// The owners' addresses are in Redis: each replica registers its id and its advertised
// address (PREFIX replica:ID, refreshed every 3 s, expiring after 10 s), and a replica
// reads the registry only for an id it has not seen in the last 5 s. A session id names a
// replica id, never an address, and only registered replicas are forwarded to.
//
// Make it with NewForwarder; Start starts the registration, Close stops it and removes
// the replica from the registry.
type Forwarder struct {
	redis   redis.UniversalClient
	id      string // this replica's id
	addr    string // this replica's advertised host:port
	key     string // its registry key
	keyPre  string // registry keys' prefix
	timeout time.Duration
	maxBody int
	client  *http.Client
	log     zerolog.Logger

	mu       sync.Mutex // guards cache and adopters
	cache    map[string]peer
	adopters map[string]peer // session id → the replica that adopted it (addr is its id), when its owner is gone

	sessions *Sessions // nil: sessions cannot be adopted (no cluster key); set by NewSessions

	restorersMu sync.Mutex // guards restorers
	restorers   []restorer // what writes again the shared state Redis lost: the sessions, the tasks

	stop      chan struct{}
	kick      chan struct{} // a registration now: the Redis client has made a new connection
	lostAt    atomic.Int64  // unix ns when this replica last found Redis had lost or missed its registry entry
	wg        sync.WaitGroup
	closeOnce sync.Once

	draining context.Context // ended by Drain: forwarded GET streams end
	drain    context.CancelFunc
}

type peer struct {
	addr    string // "": known gone
	at      time.Time
	refused bool // gone because it refused a connection (or another replica is at its address), not only unregistered
}

// NewForwarder makes the forwarder of a replica that peers reach at advertise
// (host:port), with a Redis client of its own; maxBody bounds the body of a forwarded
// POST (the listener's max_body_size). It has no side effects.
func NewForwarder(c *config.Cluster, advertise string, maxBody int, log zerolog.Logger) (*Forwarder, error) {
	if _, _, err := net.SplitHostPort(advertise); err != nil {
		return nil, fmt.Errorf("cluster: the address other replicas reach this one at must be host:port: %w", err)
	}
	kick := make(chan struct{}, 1)
	client, err := newHookedClient(c, func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	f := &Forwarder{redis: client, id: id, addr: advertise, keyPre: c.KeyPrefix + "replica:", timeout: c.Timeout,
		maxBody: maxBody, cache: map[string]peer{}, adopters: map[string]peer{}, stop: make(chan struct{}), kick: kick,
		log: log.With().Str("component", "cluster").Str("replica", id).Logger()}
	f.key = f.keyPre + id
	f.draining, f.drain = context.WithCancel(context.Background())
	f.client = &http.Client{Transport: &http.Transport{
		Proxy:               nil, // peers are reached directly, never through HTTP_PROXY
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // bytes pass as they are, encoded or not
	}}
	return f, nil
}

// Sessions is the replica's adoptable sessions (NewSessions); nil without.
func (f *Forwarder) Sessions() *Sessions { return f.sessions }

// ID is this replica's id.
func (f *Forwarder) ID() string { return f.id }

// Redis is the forwarder's Redis client, for the replica's other shared state (the
// task store); it is closed by Close.
func (f *Forwarder) Redis() redis.UniversalClient { return f.redis }

// SessionIDPrefix starts the ids of the sessions this replica opens
// (server.HTTPOptions.SessionIDPrefix).
func (f *Forwarder) SessionIDPrefix() string { return f.id + "-" }

// Start registers the replica now and every second until Close (every 250 ms while
// Redis does not answer, and at once when the Redis client has reconnected), and renews
// the Redis state of the sessions it holds when they can be adopted (NewSessions). The
// first registration failing is logged, not fatal: a replica serves its own sessions
// without Redis.
//
// A registration that finds the replica's entry gone (Redis restarted without
// persistence, or a failover lost it), or that succeeds after failing, writes again the
// hashes of the held sessions and of the tasks recorded here that Redis no longer has
// (restoreLost), so that the other replicas find their holder again.
func (f *Forwarder) Start() {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		t := time.NewTimer(heartbeatEvery)
		defer t.Stop()
		ok, registered := true, false
		for {
			f.register(&ok, &registered)
			next := heartbeatEvery
			if !ok {
				next = retryEvery
			}
			t.Reset(next)
			select {
			case <-f.stop:
				return
			case <-t.C:
			case <-f.kick:
				if !t.Stop() {
					<-t.C
				}
			}
		}
	}()
	if f.sessions == nil {
		return
	}
	f.wg.Add(1)
	go func() { // the held sessions' hashes outlive them by session_idle at least
		defer f.wg.Done()
		t := time.NewTicker(f.sessions.every)
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
				f.sessions.renew()
			}
		}
	}()
}

// register writes the replica's registry entry once (SET with GET: the answer says
// whether the entry was still there); ok says whether the last one succeeded, registered
// whether one ever did. It restores the held sessions' and tasks' hashes when Redis lost
// them.
func (f *Forwarder) register(ok, registered *bool) {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	err := f.redis.SetArgs(ctx, f.key, f.addr, redis.SetArgs{TTL: registryTTL, Get: true}).Err()
	missing := errors.Is(err, redis.Nil) // no entry before this one
	if missing {
		err = nil
	}
	switch {
	case err != nil && *ok:
		f.log.Error().Err(err).Msg("cluster: cannot register this replica in redis; other replicas cannot forward its sessions' requests to it")
	case err == nil && *registered && missing:
		f.lostAt.Store(time.Now().UnixNano())
		f.log.Warn().Msg("cluster: this replica's registry entry had vanished from redis (restarted without persistence?); registered again")
	case err == nil && !*ok:
		f.lostAt.Store(time.Now().UnixNano())
		f.log.Warn().Msg("cluster: this replica is registered in redis again")
	case err == nil:
		f.log.Debug().Str("address", f.addr).Msg("cluster: replica registered")
	}
	lost := *registered && (missing || !*ok)
	*ok = err == nil
	*registered = *registered || err == nil
	if err == nil {
		f.restoreLost(lost) // recover.go
	}
}

// Drain ends the GET streams this replica is forwarding (they would never end by
// themselves): their clients reconnect, through another replica, and resume with
// Last-Event-ID. Requests in flight go on. Call it when the HTTP handler drains.
func (f *Forwarder) Drain() { f.drain() }

// Close stops the registration, removes the replica from the registry (its sessions end
// with it) and closes the Redis client and idle peer connections. Safe twice.
func (f *Forwarder) Close() error {
	var err error
	f.closeOnce.Do(func() {
		close(f.stop)
		f.drain()
		f.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		if derr := f.redis.Del(ctx, f.key).Err(); derr != nil {
			f.log.Warn().Err(derr).Msg("cluster: could not remove this replica from the registry; it expires in 10 s")
		}
		cancel()
		f.client.CloseIdleConnections()
		err = f.redis.Close()
	})
	return err
}

// lookup returns the address of replica id: from the cache when fresh, else from Redis
// (a stale cached address when Redis cannot answer).
func (f *Forwarder) lookup(ctx context.Context, id string) (string, bool) {
	f.mu.Lock()
	p, cached := f.cache[id]
	f.mu.Unlock()
	if cached && time.Since(p.at) < cacheFor {
		return p.addr, p.addr != ""
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	addr, err := f.redis.Get(ctx, f.keyPre+id).Result()
	cancel()
	switch {
	case errors.Is(err, redis.Nil):
		f.gone(id)
		return "", false
	case err != nil:
		f.log.Warn().Err(err).Str("owner", id).Bool("cached", cached).Msg("cluster: cannot read the replica registry")
		return p.addr, cached && p.addr != ""
	}
	f.mu.Lock()
	f.cache[id] = peer{addr: addr, at: time.Now()}
	f.mu.Unlock()
	return addr, true
}

// alive remembers, for the cache's time, that replica id answered at addr.
func (f *Forwarder) alive(id, addr string) {
	f.mu.Lock()
	f.cache[id] = peer{addr: addr, at: time.Now()}
	f.mu.Unlock()
}

// awaitHolder is what a request for session id, whose owner gone is not reachable and
// whose hash Redis does not have, waits for while Redis recovers (awaitRecovery): the
// hash written again by the replica that holds the session (its adopter) or, when the id
// does not seal the owner's address (unsealedAddr), the owner registered again. It
// returns the holder then; "" when there is none (the session ended or expired) or
// Redis is not recovering; an error when Redis did not answer the last poll.
func (f *Forwarder) awaitHolder(ctx context.Context, id, gone string, unsealedAddr bool) (string, error) {
	var holder string
	err := f.awaitRecovery(ctx, func(ctx context.Context) (bool, error) {
		if unsealedAddr {
			if _, ok, _ := f.registered(ctx, gone); ok {
				holder = gone // the caller forwards to it
				return true, nil
			}
		}
		h, err := f.sessions.claim(ctx, id, gone)
		if err == nil && h != "" {
			holder = h
			return true, nil
		}
		return false, err
	})
	return holder, err
}

// gone remembers, for the cache's time, that replica id is gone (unregistered, or
// refusing connections), so that the requests of its sessions cost no trip to learn it
// again.
func (f *Forwarder) gone(id string) {
	f.mu.Lock()
	f.cache[id] = peer{at: time.Now()}
	f.mu.Unlock()
}

// refused is gone for a replica that refused a connection, or whose address another
// replica answers: one that a wait for the registry (awaitRegistered) would not bring
// back.
func (f *Forwarder) refused(id string) {
	f.mu.Lock()
	f.cache[id] = peer{at: time.Now(), refused: true}
	f.mu.Unlock()
}

// knownRefused reports whether replica id refused a connection within the cache's time.
func (f *Forwarder) knownRefused(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.cache[id]
	return ok && p.refused && time.Since(p.at) < cacheFor
}

// hopHeaders are the connection's own headers (RFC 9110 7.6.1), not the message's.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, c := range src.Values("Connection") {
		for _, name := range strings.Split(c, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

// Forward implements server.HTTPOptions.Forward: a request for a session that another
// live replica holds is sent there, and its answer streamed back. It declines (false) a
// request already forwarded and a session of this replica's (it is gone): the handler
// answers those 404, which tells the client to start a new session.
//
// When the replica that holds the session is gone (not registered, or refusing
// connections) and sessions can be adopted (NewSessions), the session is claimed in
// Redis: when this replica wins the claim, Forward declines and the handler adopts the
// session (server.SessionShare); when another replica has adopted it, the request is
// forwarded there. Only then is the adoption looked up (and cached): a request whose
// owner is alive costs no trip to Redis. Without adoption, a gone owner's session is
// declined (404).
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, sessionID string) bool {
	if r.Header.Get(ForwardedHeader) != "" {
		if meant := r.Header.Get(OwnerHeader); meant != "" && meant != f.id {
			// Meant for a replica that was at this address: it is gone, and this one
			// does not hold the session. The sender claims it (never 404: it lives on).
			w.Header().Set(NotOwnerHeader, f.id)
			writeError(w, http.StatusMisdirectedRequest, jsonrpc.ID{}, jsonrpc.CodeInternalError,
				"mcp-proxy: the proxy replica this request was forwarded to is not at this address any more")
			return true
		}
		return false
	}
	owner, _, ok := strings.Cut(sessionID, "-")
	if !ok || owner == f.id || owner == "" {
		return false
	}
	var body []byte
	var reqID jsonrpc.ID // the request's id, when the body is one request
	if r.Body != nil && r.Method == http.MethodPost {
		b, err := io.ReadAll(io.LimitReader(r.Body, int64(f.maxBody)+1))
		if err != nil || len(b) > f.maxBody {
			http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
			return true
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b)) // for the handler, when this declines
		if m, err := jsonrpc.Decode(bytes.TrimSpace(b)); err == nil && m.IsRequest() {
			reqID = m.ID
		}
	}
	if f.sessions == nil {
		return f.forwardPlain(w, r, owner, body, reqID)
	}
	if a, ok := f.adopter(sessionID); ok {
		owner = a
	}
	sealed := false
	var sealedOwner, sealedAddr string
	for range 3 { // the owner, its adopter, the adopter's adopter: then give up
		if owner == f.id {
			return false // this replica holds the claim: the handler adopts the session
		}
		addr, registered := f.lookup(r.Context(), owner)
		if registered {
			if addr != f.addr && f.forwardTo(w, r, owner, addr, body, reqID) {
				return true
			}
			f.refused(owner) // refused the connection, or another process is at its address: gone
		}
		if !sealed { // only now: a request whose owner is alive costs no opening
			o, a, _, err := f.sessions.open(sessionID)
			if err != nil {
				return false // a plain id (minted without a key) or a forged one: never adopted (404)
			}
			sealed, sealedOwner, sealedAddr = true, o, a
		}
		if !registered && owner == sealedOwner && sealedAddr != "" && sealedAddr != f.addr {
			// The registry does not name the owner: Redis cannot be reached, or restarted
			// and the owner has not registered again yet (or the owner is gone). Its
			// address is sealed into the id; the OwnerHeader check tells it is the owner.
			if f.forwardTo(w, r, owner, sealedAddr, body, reqID) {
				f.alive(owner, sealedAddr)
				return true
			}
			f.refused(owner)
		}
		holder, err := f.sessions.claim(r.Context(), sessionID, owner)
		if err == nil && holder == "" {
			// No hash: the session ended or expired, or Redis lost it a moment ago and
			// its holder writes it again.
			holder, err = f.awaitHolder(r.Context(), sessionID, owner, sealedAddr == "")
		}
		if err != nil {
			if r.Context().Err() != nil {
				return true // the client went away
			}
			f.log.Warn().Err(err).Str("gone", owner).Msg("cluster: cannot claim a session whose replica is gone; answering 503")
			writeError(w, http.StatusServiceUnavailable, reqID, jsonrpc.CodeInternalError,
				"mcp-proxy: the proxy replica that held this session is gone, and the session cannot be taken over now; try again")
			return true
		}
		if holder == "" {
			return false // ended or expired: 404
		}
		if holder == f.id {
			f.log.Info().Str("gone", owner).Msg("cluster: claimed a session whose replica is gone; adopting it")
		}
		f.noteAdopter(sessionID, holder)
		owner = holder
	}
	return false
}

// forwardPlain forwards a request of a session that cannot be adopted to its owner; when
// the owner is gone it declines (the handler answers 404: start a new session).
func (f *Forwarder) forwardPlain(w http.ResponseWriter, r *http.Request, owner string, body []byte, reqID jsonrpc.ID) bool {
	addr, ok := f.lookup(r.Context(), owner)
	if !ok {
		return false
	}
	if addr != f.addr && f.forwardTo(w, r, owner, addr, body, reqID) {
		return true
	}
	f.refused(owner)
	f.log.Warn().Str("owner", owner).Msg("cluster: the replica that held the session is unreachable; answering 404 so that the client starts a new session")
	writeError(w, http.StatusNotFound, reqID, jsonrpc.CodeInvalidRequest, "Session not found: the proxy replica that held it stopped")
	return true
}

// adopter is the replica that adopted session id, as last seen (for the cache's time).
func (f *Forwarder) adopter(id string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.adopters[id]
	if !ok {
		return "", false
	}
	if time.Since(a.at) >= cacheFor {
		delete(f.adopters, id)
		return "", false
	}
	return a.addr, true
}

func (f *Forwarder) noteAdopter(id, holder string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for k, a := range f.adopters { // prune: the map holds the last few seconds' adoptions only
		if now.Sub(a.at) >= cacheFor {
			delete(f.adopters, k)
		}
	}
	f.adopters[id] = peer{addr: holder, at: now}
}

// forwardTo sends the request to replica owner at addr and streams its answer back; it
// returns false, having written nothing, when the owner is gone: it refused the
// connection, or the process at addr is another replica (NotOwnerHeader).
func (f *Forwarder) forwardTo(w http.ResponseWriter, r *http.Request, owner, addr string, body []byte, reqID jsonrpc.ID) bool {
	ctx := r.Context()
	if r.Method == http.MethodGet { // a stream: it ends when this replica drains
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(f.draining, cancel)()
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "cannot forward the request", http.StatusInternalServerError)
		return true
	}
	copyHeader(out.Header, r.Header)
	out.Host = r.Host // the owner checks the Host the client sent, as this replica did
	out.Header.Set(ForwardedHeader, f.id)
	out.Header.Set(OwnerHeader, owner)
	log := f.log.With().Str("owner", owner).Str("method", r.Method).Logger()
	resp, err := f.client.Do(out)
	if err != nil {
		if ctx.Err() != nil {
			return true // the client went away, or this replica drains
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			log.Warn().Err(err).Msg("cluster: the replica that holds the session refuses connections: it is gone")
			return false
		}
		log.Error().Err(err).Msg("cluster: forwarding to the replica that holds the session failed")
		writeError(w, http.StatusBadGateway, reqID, jsonrpc.CodeInternalError,
			"mcp-proxy: the proxy replica that holds this session stopped or failed before answering this request (a call may have run)")
		return true
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusMisdirectedRequest && resp.Header.Get(NotOwnerHeader) != "" {
		log.Info().Str("address", addr).Str("there", resp.Header.Get(NotOwnerHeader)).
			Msg("cluster: another replica is at the address of the one that held the session: that one is gone")
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // the connection is reused
		return false
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return true // the client went away: closing resp.Body tells the owner
			}
			_ = rc.Flush()
		}
		if rerr == io.EOF {
			return true
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return true // the client went away, or this replica drains (the client resumes elsewhere)
			}
			log.Warn().Err(rerr).Msg("cluster: the replica that holds the session broke off its answer")
			if reqID.IsValid() && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				writeErrorEvent(w, reqID)
				_ = rc.Flush()
			}
			return true
		}
	}
}

// GoneMessage is the error a call gets when the replica it was in flight on stopped.
const GoneMessage = "mcp-proxy: the proxy replica that held this session stopped while the call was in flight"

// writeErrorEvent writes the event that answers call id with the proxy's error: the
// replica it was in flight on stopped.
func writeErrorEvent(w io.Writer, id jsonrpc.ID) {
	m := jsonrpc.NewErrorResponse(id, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: GoneMessage,
		Data: []byte(`{"origin":"mcp-proxy"}`)})
	if b, err := m.Encode(); err == nil {
		fmt.Fprintf(w, "\nevent: message\ndata: %s\n\n", b)
	}
}

// copyBufs are the buffers that carry forwarded answers, reused across requests.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// writeError answers with one JSON-RPC error as application/json, marked as the proxy's
// (data.origin "mcp-proxy").
func writeError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string) {
	b, err := jsonrpc.NewErrorResponse(id, &jsonrpc.Error{Code: code, Message: msg, Data: []byte(`{"origin":"mcp-proxy"}`)}).Encode()
	if err != nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
