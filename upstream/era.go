package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// Protocol eras of an upstream.
const (
	ProtocolAuto   = "auto"   // probe with server/discover, fall back to initialize
	ProtocolLegacy = "legacy" // initialize handshake and a session (2024-11-05 … 2025-11-25)
	ProtocolModern = "modern" // stateless, _meta on every request (2026-07-28)
)

// ClientMeta is the identity of the client a request is made for, era-neutral: the
// upstream side turns it into _meta (modern upstreams) or leaves it to the session's
// initialize (legacy upstreams).
type ClientMeta struct {
	Capabilities json.RawMessage // already narrowed to what the proxy relays
	Info         json.RawMessage // clientInfo
	LogLevel     string          // requested log level, "" for none

	capsKey atomic.Pointer[string] // CapsKey's result
}

// CapsKey returns key(m.Capabilities), computed once per ClientMeta: a session's meta
// serves every call of the session, which then does not decode the capabilities again.
// Capabilities must not change once it has been called.
func (m *ClientMeta) CapsKey(key func(caps json.RawMessage) string) string {
	if p := m.capsKey.Load(); p != nil {
		return *p
	}
	k := key(m.Capabilities)
	m.capsKey.Store(&k)
	return k
}

// modernKeys are the _meta keys of the modern era that identify the client.
var modernKeys = []string{mcp.MetaProtocolVersion, mcp.MetaClientCapabilities, mcp.MetaClientInfo, mcp.MetaLogLevel}

// adapt builds the params sent upstream: the client's progress token replaced by one from
// this connection's id space, and the request metadata of this upstream's era (modern:
// version, capabilities, client info and log level stamped; legacy: the modern keys and
// retry fields removed). origToken is the client's progress token when one is mapped.
func (c *conn) adapt(req *Request, id int64) (params, origToken json.RawMessage, err error) {
	params = req.Params
	meta, hasMeta, _ := jsonx.Get(params, "_meta")
	if hasMeta && (len(meta) == 0 || meta[0] != '{') {
		return nil, nil, errors.New("_meta is not an object")
	}
	var changes []jsonx.Change
	if hasMeta {
		if tok, ok, _ := jsonx.Get(meta, mcp.MetaProgressToken); ok {
			if req.Progress != nil {
				origToken = tok
				changes = append(changes, jsonx.Change{Key: mcp.MetaProgressToken, Value: strconv.AppendInt(nil, id, 10)})
			} else {
				changes = append(changes, jsonx.Change{Key: mcp.MetaProgressToken, Delete: true})
			}
		}
	}
	if c.modern.Load() {
		changes = append(changes, c.modernMeta(req)...)
	} else if hasMeta {
		for _, k := range modernKeys {
			if _, ok, _ := jsonx.Get(meta, k); ok {
				changes = append(changes, jsonx.Change{Key: k, Delete: true})
			}
		}
	}
	var paramChanges []jsonx.Change
	if len(changes) > 0 {
		newMeta, err := jsonx.Edit(meta, changes)
		if err != nil {
			return nil, nil, err
		}
		if string(newMeta) == "{}" {
			paramChanges = append(paramChanges, jsonx.Change{Key: "_meta", Delete: true})
		} else {
			paramChanges = append(paramChanges, jsonx.Change{Key: "_meta", Value: newMeta})
		}
	}
	if !c.modern.Load() && len(params) > 0 {
		for _, k := range []string{"requestState", "inputResponses"} {
			if _, ok, _ := jsonx.Get(params, k); ok {
				paramChanges = append(paramChanges, jsonx.Change{Key: k, Delete: true})
			}
		}
	}
	if len(paramChanges) == 0 {
		return params, origToken, nil
	}
	params, err = jsonx.Edit(params, paramChanges)
	return params, origToken, err
}

// modernMeta is the _meta a modern upstream needs on every request.
func (c *conn) modernMeta(req *Request) []jsonx.Change {
	c.u.mu.Lock()
	caps := c.u.spec.ClientCapabilities
	c.u.mu.Unlock()
	info, _ := jsonx.Marshal(map[string]string{"name": c.u.spec.ClientName, "version": c.u.spec.ClientVersion})
	level := ""
	if l := c.logLevel.Load(); l != nil {
		level = *l
	}
	if m := req.Meta; m != nil {
		if len(m.Capabilities) > 0 {
			caps = m.Capabilities
		}
		if len(m.Info) > 0 {
			info = m.Info
		}
		if m.LogLevel != "" {
			level = m.LogLevel
		}
	}
	if len(caps) == 0 {
		caps = json.RawMessage("{}")
	}
	out := []jsonx.Change{
		{Key: mcp.MetaProtocolVersion, Value: jsonrpc.AppendString(nil, c.version)},
		{Key: mcp.MetaClientCapabilities, Value: caps},
		{Key: mcp.MetaClientInfo, Value: info},
	}
	if level != "" {
		out = append(out, jsonx.Change{Key: mcp.MetaLogLevel, Value: jsonrpc.AppendString(nil, level)})
	}
	return out
}

// errProbeUnanswered means a child process read the server/discover probe and did not
// answer it in time. It may answer later, so its connection must not carry another
// handshake: the child is started again instead.
var errProbeUnanswered = errors.New("the upstream read the probe but did not answer it in time")

// discover probes for a modern upstream. It returns an error when the upstream answered
// anything but a usable DiscoverResult, or nothing in time (errProbeUnanswered for a child
// process, see probe).
func (c *conn) discover(ctx context.Context, timeout time.Duration) (Info, error) {
	version := mcp.ModernVersion
	var resp *jsonrpc.Message
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		c.modern.Store(true) // so that send stamps the request
		c.version = version
		c.setProtocolVersion(version)
		resp, err = c.probe(ctx, &Request{Method: mcp.MethodServerDiscover, Params: json.RawMessage("{}")}, timeout)
		c.modern.Store(false)
		c.version = ""
		c.setProtocolVersion("")
		if err != nil || resp.Error == nil || resp.Error.Code != mcp.CodeUnsupportedVersion {
			break
		}
		// -32022 lists what the server speaks: try once more with a modern version from
		// that list, if there is one this proxy speaks too.
		retry := ""
		var data struct {
			Supported []string `json:"supported"`
		}
		if json.Unmarshal(resp.Error.Data, &data) == nil {
			for _, v := range data.Supported {
				if mcp.IsModernVersion(v) {
					retry = v
					break
				}
			}
		}
		if retry == "" {
			break
		}
		version = retry
	}
	if err != nil {
		return Info{}, err
	}
	if resp.Error != nil {
		return Info{}, fmt.Errorf("answered with error %d: %s", resp.Error.Code, resp.Error.Message)
	}
	var res struct {
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
		Instructions      string          `json:"instructions"`
		Meta              struct {
			ServerInfo json.RawMessage `json:"io.modelcontextprotocol/serverInfo"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return Info{}, fmt.Errorf("malformed result: %w", err)
	}
	for _, v := range res.SupportedVersions {
		if mcp.IsModernVersion(v) {
			info := Info{ProtocolVersion: v, Capabilities: res.Capabilities, ServerInfo: res.Meta.ServerInfo,
				Instructions: res.Instructions, Modern: true}
			if len(info.Capabilities) == 0 || string(info.Capabilities) == "null" {
				info.Capabilities = json.RawMessage("{}")
			}
			if err := json.Unmarshal(info.Capabilities, &info.caps); err != nil {
				return Info{}, fmt.Errorf("malformed capabilities: %w", err)
			}
			return info, nil
		}
	}
	return Info{}, fmt.Errorf("no modern version among %v", res.SupportedVersions)
}

// unreader is a link that can tell how much of what was written to it the peer has not
// read yet (a child's stdin pipe, see transport.Process.Unread).
type unreader interface {
	Unread() (n int, ok bool)
}

// probePoll is how often probe checks whether a child has read its probe.
const probePoll = 50 * time.Millisecond

// probe sends a request that a server may leave unanswered (server/discover to a server
// that does not know it) and waits for the answer.
//
// Over HTTP no answer within timeout is the answer. A child process that has not read the
// request yet has said nothing at all: it may still be starting (npx downloading, go run
// or uvx compiling, a JVM warming up), so the timeout runs only from the moment it has
// read everything written to it; until then only ctx (the startup timeout) ends the wait,
// and an answer, however late, is used. A request the child read but left unanswered is
// abandoned with errProbeUnanswered, without a cancellation: the child may still be
// working on it, so the caller must not send it another handshake.
func (c *conn) probe(ctx context.Context, req *Request, timeout time.Duration) (*jsonrpc.Message, error) {
	ur, ok := c.proc.(unreader)
	if !ok {
		req.Timeout = timeout
		return c.call(ctx, req)
	}
	ch := make(chan callResult, 1)
	req.Timeout = -1 // the wait below ends it
	id := c.send(ctx, req, func(m *jsonrpc.Message, err error) { ch <- callResult{m, err} })
	if id == 0 { // failed before it was written
		r := <-ch
		return r.msg, r.err
	}
	poll := time.NewTicker(probePoll)
	defer poll.Stop()
	pollC := poll.C
	var expired <-chan time.Time
	for {
		select {
		case r := <-ch:
			return r.msg, r.err
		case <-pollC:
			if n, known := ur.Unread(); known && n > 0 {
				continue // not read yet: the child is still starting
			}
			pollC = nil
			t := time.NewTimer(timeout)
			defer t.Stop()
			expired = t.C
		case <-expired:
			if c.take(id) != nil {
				return nil, errProbeUnanswered
			}
			r := <-ch // answered just now
			return r.msg, r.err
		}
	}
}

// handshake establishes the upstream's era and identity.
func (c *conn) handshake(ctx context.Context) (Info, error) {
	proto := c.u.spec.Protocol
	if proto == "" {
		proto = ProtocolAuto
	}
	if proto == ProtocolAuto && !c.u.overHTTP() && (c.u.preferLegacy.Load() || c.u.probeUnanswered.Load()) {
		// A legacy client (a server that speaks both eras is best driven in the era of the
		// client), or a child that left the probe unanswered before: try the legacy era
		// first, then discovery.
		info, err := c.initialize(ctx)
		if err == nil {
			c.version = info.ProtocolVersion
			c.setProtocolVersion(info.ProtocolVersion)
			return info, nil
		}
		if ctx.Err() != nil {
			return Info{}, err
		}
		c.log.Debug().Err(err).Msg("initialize refused; probing server/discover")
		proto = ProtocolModern // only discovery is left to try
	}
	if proto != ProtocolLegacy {
		probe := min(c.u.spec.StartupTimeout/2, 10*time.Second)
		if c.u.probeTimeout > 0 {
			probe = c.u.probeTimeout
		}
		if proto == ProtocolModern {
			probe = c.u.spec.StartupTimeout
		}
		info, err := c.discover(ctx, probe)
		if err == nil {
			c.modern.Store(true)
			c.version = info.ProtocolVersion
			c.setProtocolVersion(info.ProtocolVersion)
			return info, nil
		}
		if proto == ProtocolModern {
			return Info{}, fmt.Errorf("server/discover: no usable answer from an upstream configured as protocol = %q: %w", ProtocolModern, err)
		}
		if errors.Is(err, errProbeUnanswered) || ctx.Err() != nil {
			// Nothing more may be sent on this connection, or there is no time left.
			return Info{}, fmt.Errorf("server/discover: %w", err)
		}
		c.log.Debug().Err(err).Msg("server/discover probe failed; falling back to initialize")
	}
	info, err := c.initialize(ctx)
	if err == nil {
		c.version = info.ProtocolVersion
		c.setProtocolVersion(info.ProtocolVersion)
	}
	return info, err
}

// subscribe opens the subscription through which a modern upstream announces list
// changes; it stays open for the connection's life.
func (c *conn) subscribe(info Info) {
	want := map[string]bool{}
	if info.HasTools() {
		want["toolsListChanged"] = true
	}
	if info.HasPrompts() {
		want["promptsListChanged"] = true
	}
	if info.HasResources() {
		want["resourcesListChanged"] = true
	}
	if len(want) == 0 {
		return
	}
	params, _ := jsonx.Marshal(map[string]any{"notifications": want})
	c.send(c.ctx, &Request{Method: mcp.MethodSubscriptionsListen, Params: params, Timeout: -1},
		func(_ *jsonrpc.Message, err error) {
			if err != nil && c.ctx.Err() == nil {
				c.log.Warn().Err(err).Msg("the upstream ended its list-change subscription")
			}
		})
}

// maxInputRounds bounds input_required rounds for one call.
const maxInputRounds = 10

// fulfilInputs wraps done for a client that cannot handle input_required results itself
// (a legacy client): when a modern upstream asks for input, each input request is put to
// the client as a real request through req.Input and the call is retried with the
// answers and the upstream's requestState, until it completes.
func (c *conn) fulfilInputs(ctx context.Context, req *Request, done func(*jsonrpc.Message, error), round int) func(*jsonrpc.Message, error) {
	return func(resp *jsonrpc.Message, err error) {
		if err != nil || resp.Error != nil {
			done(resp, err)
			return
		}
		if rt, _, _ := jsonx.GetString(resp.Result, "resultType"); rt != mcp.ResultTypeInputRequired {
			done(resp, nil)
			return
		}
		if req.Input == nil || round >= maxInputRounds {
			done(nil, mcp.ProxyError(mcp.CodeUpstreamProtocol, c.u.spec.Name,
				fmt.Sprintf("upstream %q needs input from the client that the proxy cannot obtain", c.u.spec.Name)))
			return
		}
		// Asking the client blocks: do it off the reader goroutine.
		c.u.wg.Add(1)
		go func() {
			defer c.u.wg.Done()
			rctx, end := startRound(ctx, req.Method, round+1)
			retry, err := c.answerInputs(rctx, req, resp.Result)
			if err != nil {
				end(err)
				done(nil, err)
				return
			}
			// The retry's input rounds are this wrapper's (with the round counted), not
			// a fresh one's at round 0.
			retry.ClientHandlesInput = true
			next := c.fulfilInputs(ctx, req, done, round+1)
			c.send(rctx, retry, func(m *jsonrpc.Message, err error) {
				if err == nil && m.Error != nil {
					err = m.Error
				}
				end(err)
				next(m, err)
			})
		}()
	}
}

// answerInputs asks the client for every input request and builds the retry.
func (c *conn) answerInputs(ctx context.Context, req *Request, result json.RawMessage) (*Request, error) {
	var ir struct {
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
		RequestState *string `json:"requestState"`
	}
	if err := json.Unmarshal(result, &ir); err != nil {
		return nil, mcp.ProxyError(mcp.CodeUpstreamProtocol, c.u.spec.Name, "malformed input_required result: "+err.Error())
	}
	responses := map[string]json.RawMessage{}
	for k, r := range ir.InputRequests {
		res, rerr := req.Input(ctx, r.Method, r.Params)
		if rerr != nil {
			return nil, rerr
		}
		responses[k] = res
	}
	changes := []jsonx.Change{}
	if len(responses) > 0 {
		b, _ := jsonx.Marshal(responses)
		changes = append(changes, jsonx.Change{Key: "inputResponses", Value: b})
	}
	if ir.RequestState != nil {
		changes = append(changes, jsonx.Change{Key: "requestState", Value: jsonrpc.AppendString(nil, *ir.RequestState)})
	}
	params, err := jsonx.Edit(req.Params, changes)
	if err != nil {
		return nil, err
	}
	retry := *req
	retry.Params = params
	return &retry, nil
}

// legacyOnModern serves the legacy-only requests a modern upstream does not know, and
// reports whether it did: logging/setLevel becomes the log level stamped on later
// requests, and resources/subscribe and unsubscribe open and close a subscription with
// that resource.
func (c *conn) legacyOnModern(ctx context.Context, req *Request, done func(*jsonrpc.Message, error)) bool {
	switch req.Method {
	case mcp.MethodLoggingSetLevel:
		if level, ok, _ := jsonx.GetString(req.Params, "level"); ok {
			c.logLevel.Store(&level)
		}
	case mcp.MethodResourcesSubscribe:
		uri, _, _ := jsonx.GetString(req.Params, "uri")
		params, _ := jsonx.Marshal(map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{uri}}})
		id := c.send(c.ctx, &Request{Method: mcp.MethodSubscriptionsListen, Params: params, Timeout: -1},
			func(*jsonrpc.Message, error) {})
		c.resMu.Lock()
		c.resListens[uri] = append(c.resListens[uri], id)
		c.resMu.Unlock()
	case mcp.MethodResourcesUnsubscribe:
		uri, _, _ := jsonx.GetString(req.Params, "uri")
		c.resMu.Lock()
		ids := c.resListens[uri]
		var id int64
		if len(ids) > 0 {
			id = ids[len(ids)-1]
			c.resListens[uri] = ids[:len(ids)-1]
		}
		c.resMu.Unlock()
		if id != 0 && c.take(id) != nil {
			c.sendCancel(id, "unsubscribed")
		}
	default:
		return false
	}
	done(jsonrpc.NewResult(jsonrpc.ID{}, nil), nil)
	return true
}
