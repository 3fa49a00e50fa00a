package router

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// Readiness without waiting for every upstream: the front end answers initialize after a
// short grace and lists what is ready; upstreams that finish starting later join the
// catalogue (a rebuild, announced with list_changed). A call naming a tool or prompt that
// is not listed yet (or a resource URI, or a completion reference) waits for the
// upstreams still starting, since one of them may bring it.

// firstAttempter is an upstream that tells, without waiting, whether its first start
// attempt has finished. Upstreams without it count as started.
type firstAttempter interface {
	FirstAttemptDone() bool
}

func firstAttemptDone(u Upstream) bool {
	fa, ok := u.(firstAttempter)
	return !ok || fa.FirstAttemptDone()
}

// Settled reports, without waiting, whether every upstream's first start attempt has
// finished. Once true it stays true (upstreams a reload adds join the router only once
// they have started).
func (r *Router) Settled() bool {
	if r.settled.Load() {
		return true
	}
	for _, b := range r.all() {
		if !firstAttemptDone(b.up) {
			return false
		}
	}
	r.settled.Store(true)
	return true
}

// Starting returns the names of the upstreams whose first start attempt has not
// finished, in config order; nil once the router has settled.
func (r *Router) Starting() []string {
	if r.Settled() {
		return nil
	}
	var names []string
	for _, b := range r.all() {
		if !firstAttemptDone(b.up) {
			names = append(names, b.name)
		}
	}
	return names
}

// defaultStartWait bounds the wait of a call for a name not listed yet when
// Options.StartWait is not set.
const defaultStartWait = 60 * time.Second

// awaitStarting waits for the upstreams still starting, one first start attempt after
// another as they finish, until found reports true or none is left starting (or ctx
// ends, or Options.StartWait has passed). It returns found's last answer.
func (r *Router) awaitStarting(ctx context.Context, found func() bool) bool {
	var waiting []*backend
	for _, b := range r.all() {
		if !firstAttemptDone(b.up) {
			waiting = append(waiting, b)
		}
	}
	if len(waiting) == 0 {
		return found()
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartWait)
	defer cancel()
	done := make(chan struct{}, len(waiting))
	for _, b := range waiting {
		go func() {
			_ = b.up.WaitFirstAttempt(ctx) // its outcome shows in the snapshot
			done <- struct{}{}
		}()
	}
	for range waiting {
		select {
		case <-done:
			if found() {
				return true
			}
		case <-ctx.Done():
			return found()
		}
	}
	return found()
}

// callWhenStarted serves a tools/call or prompts/get whose name is not in the catalogue
// while some upstreams are still starting: it waits for them (see awaitStarting) and
// then routes the call, or answers that the name is unknown.
func (r *Router) callWhenStarted(ctx context.Context, req *Request, what string, reply Reply) {
	name, _, _ := jsonx.GetString(req.Params, "name")
	index := func() map[string]*entry {
		if what == "tool" {
			return r.snap.Load().toolIndex(req)
		}
		return r.snap.Load().promptIndex(req)
	}
	r.whenStarted(ctx, what, name, func() bool { return index()[name] != nil },
		func() { r.callEntry(ctx, req, index()[name], name, what, reply) }, reply)
}

// whenStarted waits for the upstreams still starting until known reports true (see
// awaitStarting), then runs route, which routes the request as the catalogue stands
// then (or refuses it as unknown); a wait the client gave up answers ErrCancelled.
func (r *Router) whenStarted(ctx context.Context, what, name string, known func() bool, route func(), reply Reply) {
	r.log.Debug().Ctx(ctx).Str("name", name).Strs("starting", r.Starting()).
		Msgf("%s not listed yet: waiting for the upstreams still starting", what)
	if !r.awaitStarting(ctx, known) && ctx.Err() != nil {
		reply(nil, ErrCancelled)
		return
	}
	route()
}

// listsURI reports whether an upstream lists uri, or a template of one matches it (a URI
// that cannot be normalised counts as listed: the routing refuses it at once).
func (r *Router) listsURI(req *Request, uri string) bool {
	canon, err := mcp.NormalizeURI(uri)
	if err != nil {
		return true
	}
	snap := r.snap.Load()
	owner, _, _ := snap.resolveURI(uri, canon)
	if v := snap.viewOf(req); owner != nil && v != nil {
		return v.servesBackend(owner)
	}
	return owner != nil
}

// knowsRef reports whether the catalogue has what a completion reference names (a
// malformed or unknown kind of reference counts as known: the routing refuses it).
func (r *Router) knowsRef(req *Request, ref json.RawMessage) bool {
	typ, _, _ := jsonx.GetString(ref, "type")
	switch typ {
	case "ref/prompt":
		name, _, _ := jsonx.GetString(ref, "name")
		return r.snap.Load().promptIndex(req)[name] != nil
	case "ref/resource":
		uri, _, _ := jsonx.GetString(ref, "uri")
		return r.snap.Load().templateOwner(uri) != nil || r.listsURI(req, uri)
	}
	return true
}
