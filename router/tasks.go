package router

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Experimental tasks (2025-11-25): a request carrying params.task may be answered with a
// CreateTaskResult; the task's later requests (tasks/get, tasks/result, tasks/cancel)
// carry only its taskId, so the router remembers which upstream created each task, in a
// TaskStore (see Options.Tasks).
//
// The store names the owner by upstream name, and the router resolves the name to its
// backend. A task created in a per-client (or capability) session with an upstream
// belongs to that session, which lives in this process only: the store keeps an opaque
// key of the session (TaskOwner.Session), made of a random prefix of this router's own
// and a counter, and the router finds the session by that key among its live ones. So
// the whole table stays in the store (nothing per task is kept aside in memory, and the
// store's bound is the only one), a replica that reads another's key knows the session
// is not its own (rather than sending the task's requests to a session that does not
// know it), and a session that has ended is told apart from a task never seen.

// taskTable is the router's side of its TaskStore: it turns backends into owners and
// back, and logs what the store says when no client is waiting for it.
type taskTable struct {
	store  TaskStore
	log    zerolog.Logger
	prefix string        // of this router's session keys
	seq    atomic.Uint64 // the last session key's number
}

// init sets the table up over store (nil: in memory).
func (t *taskTable) init(store TaskStore, log zerolog.Logger) {
	if store == nil {
		store = NewMemoryTasks(0)
	}
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	t.store, t.log, t.prefix = store, log, base64.RawURLEncoding.EncodeToString(b[:])+"."
}

// newSessionKey names a new per-client session for the store.
func (t *taskTable) newSessionKey() string {
	return t.prefix + strconv.FormatUint(t.seq.Add(1), 10)
}

// put records b as the owner of task id, logging a failure.
func (t *taskTable) put(ctx context.Context, id string, b *backend, creator string, ttl time.Duration) {
	if err := t.store.Put(ctx, id, TaskOwner{Upstream: b.name, Session: b.session, Principal: creator}, ttl); err != nil {
		t.log.Error().Err(err).Str("upstream", b.name).Str("task", id).
			Msg("task store: could not record the task's owner; its later requests will not find it")
	}
}

// record is put for a task seen without a ttl, outside any request.
func (t *taskTable) record(id string, b *backend, creator string) {
	t.put(context.Background(), id, b, creator, 0)
}

// recordTask records b as the owner of a task object ({"taskId":...,"ttl":...}: in a
// CreateTaskResult, a listing, a status notification).
func (r *Router) recordTask(ctx context.Context, b *backend, task json.RawMessage, creator string) (id string, ok bool) {
	id, ok, _ = jsonx.GetString(task, "taskId")
	if !ok || id == "" {
		return "", false
	}
	var ttl time.Duration
	if v, ok, _ := jsonx.Get(task, "ttl"); ok {
		if ms, err := strconv.ParseFloat(string(v), 64); err == nil && ms > 0 && ms < float64(math.MaxInt64/int64(time.Millisecond)) {
			ttl = time.Duration(ms * float64(time.Millisecond))
		}
	}
	r.tasks.put(ctx, id, b, creator, ttl)
	return id, true
}

// TaskReplica is the proxy replica that holds task id when it is not this one (see
// TaskOwner.Replica): the front end forwards the task's requests there. "" when the task
// is this replica's, unknown, or the store cannot say (the request is then served here,
// and answered as such).
func (r *Router) TaskReplica(ctx context.Context, id string) string {
	o, ok, err := r.tasks.store.Get(ctx, id)
	if err != nil || !ok {
		return ""
	}
	return o.Replica
}

// taskOwner resolves a task's owner to the backend its requests go to; the error is
// what the client is told.
func (r *Router) taskOwner(id string, o TaskOwner) (*backend, error) {
	if o.Replica != "" { // not forwarded there (that replica is gone, or no front end forwards)
		return nil, mcp.ProxyError(mcp.CodeUpstreamUnavailable, o.Upstream,
			fmt.Sprintf("task %s is held by mcp-proxy replica %s, which cannot be reached", id, o.Replica))
	}
	for _, b := range r.all() {
		if b.name != o.Upstream {
			continue
		}
		if o.Session == "" {
			return b, nil
		}
		if !strings.HasPrefix(o.Session, r.tasks.prefix) {
			return nil, mcp.ProxyError(mcp.CodeUpstreamUnavailable, b.name,
				fmt.Sprintf("task %s is held by a session with upstream %q on another mcp-proxy replica", id, b.name))
		}
		for _, p := range []*clientPool{b.pool, b.capsPool} {
			if inst := p.bySession(o.Session); inst != nil {
				return &inst.backend, nil
			}
		}
		return nil, mcp.ProxyError(mcp.CodeUpstreamUnavailable, b.name,
			fmt.Sprintf("the session with upstream %q that held task %s has ended", b.name, id))
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown task: %s", id) // an upstream this proxy does not have
}

// errTaskStore is what a client is told when the task store fails.
func errTaskStore(id string) error {
	return mcp.ProxyError(jsonrpc.CodeInternalError, "", "mcp-proxy could not look up task "+id+"; try again later")
}

// principalName is the identity of a request's principal (principal.ID): whose a
// task is. An API key named "alice" does not own the tasks of a token whose subject is
// "alice".
func principalName(req *Request) string {
	if req.Principal == nil {
		return ""
	}
	return req.Principal.ID()
}

// noteTask records the owner of a task created by a result ({"task":{"taskId":...}}).
func (r *Router) noteTask(ctx context.Context, b *backend, req *Request, result json.RawMessage) {
	task, ok, err := jsonx.Get(result, "task")
	if err != nil || !ok {
		return
	}
	r.recordTask(context.WithoutCancel(ctx), b, task, principalName(req))
}

// createdBy reports whether the store says task id was created by principal (not "");
// false when the store cannot say.
func (r *Router) createdBy(ctx context.Context, id, principal string) bool {
	if principal == "" {
		return false
	}
	o, ok, err := r.tasks.store.Get(ctx, id)
	if err != nil {
		r.log.Error().Err(err).Str("task", id).Msg("task store: lookup failed; the task is left out of the listing")
		return false
	}
	return ok && o.Principal == principal
}

// callTask routes tasks/get, tasks/result and tasks/cancel to the task's owner.
func (r *Router) callTask(ctx context.Context, req *Request, reply Reply) {
	id, ok, err := jsonx.GetString(req.Params, "taskId")
	if err != nil || !ok {
		reply(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: taskId is required"))
		return
	}
	o, known, err := r.tasks.store.Get(ctx, id)
	if err != nil && ctx.Err() != nil {
		reply(nil, ErrCancelled) // the client went away while the store was asked
		return
	}
	if err != nil {
		r.log.Error().Err(err).Str("task", id).Str("method", req.Method).Msg("task store: lookup failed; request refused")
		reply(nil, errTaskStore(id))
		return
	}
	// Under a policy a task belongs to the principal that created it; so does one of a
	// per-principal upstream, which lives in its creator's own session.
	mine := o.Principal != "" && o.Principal == principalName(req)
	if !known || ((r.Guard() != nil || r.perPrincipal(o.Upstream)) && !mine) {
		reply(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown task: %s", id))
		return
	}
	owner, err := r.taskOwner(id, o)
	if err != nil {
		reply(nil, err)
		return
	}
	r.routeCall(ctx, &Call{Method: req.Method, Params: req.Params, Request: req, owner: owner,
		Target: &Target{Kind: TargetTask, Name: id, Original: id, Upstream: owner.name}}, reply)
}

// listTasks merges tasks/list from every upstream that lists tasks, draining their pages
// and answering in one page.
func (r *Router) listTasks(ctx context.Context, req *Request) (json.RawMessage, error) {
	if cur, ok, _ := jsonx.Get(req.Params, "cursor"); ok && string(cur) != "null" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: invalid cursor")
	}
	var (
		mu  sync.Mutex
		all []json.RawMessage
		wg  sync.WaitGroup
	)
	for _, b := range r.all() {
		l, ok := b.up.(lister)
		if st, _ := b.up.State(); !ok || st != upstream.StateReady || !b.up.Info().HasTaskList() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			items, err := l.ListAll(ctx, mcp.MethodTasksList, "tasks")
			if err != nil {
				r.log.Warn().Err(err).Str("upstream", b.name).Msg("tasks/list failed upstream; its tasks are left out")
			}
			mine := items[:0:0]
			for _, it := range items {
				id, ok := r.recordTask(ctx, b, it, "")
				if r.Guard() == nil || (ok && r.createdBy(ctx, id, principalName(req))) {
					mine = append(mine, it)
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if all == nil {
		all = []json.RawMessage{} // a required array: [] and never null
	}
	out, err := jsonx.Marshal(map[string]any{"tasks": all})
	if err != nil {
		return nil, err
	}
	return out, nil
}
