package router

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Experimental tasks (2025-11-25): a request carrying params.task may be answered with a
// CreateTaskResult; the task's later requests (tasks/get, tasks/result, tasks/cancel)
// carry only its taskId, so the router remembers which upstream created each task.

// maxTasks bounds the task table; the oldest entries go first when it is full.
const maxTasks = 10000

type taskEntry struct {
	owner     *backend
	seen      time.Time
	principal string // who created it; "" when the proxy only saw it listed
}

// taskTable maps task ids to the upstream that created them.
type taskTable struct {
	mu    sync.Mutex // guards tasks
	tasks map[string]taskEntry
}

func (t *taskTable) record(id string, b *backend, creator string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tasks == nil {
		t.tasks = map[string]taskEntry{}
	}
	if len(t.tasks) >= maxTasks {
		var oldestID string
		var oldest time.Time
		for k, e := range t.tasks {
			if oldestID == "" || e.seen.Before(oldest) {
				oldestID, oldest = k, e.seen
			}
		}
		delete(t.tasks, oldestID)
	}
	if creator == "" {
		creator = t.tasks[id].principal // a listing does not change who created it
	}
	t.tasks[id] = taskEntry{owner: b, seen: time.Now(), principal: creator}
}

func (t *taskTable) get(id string) taskEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tasks[id]
}

// principalName is the name policy knows a request's principal by.
func principalName(req *Request) string {
	if req.Principal == nil {
		return ""
	}
	return req.Principal.Name
}

// noteTask records the owner of a task created by a result ({"task":{"taskId":...}}).
func (r *Router) noteTask(b *backend, req *Request, result json.RawMessage) {
	task, ok, err := jsonx.Get(result, "task")
	if err != nil || !ok {
		return
	}
	if id, ok, _ := jsonx.GetString(task, "taskId"); ok && id != "" {
		r.tasks.record(id, b, principalName(req))
	}
}

// callTask routes tasks/get, tasks/result and tasks/cancel to the task's owner.
func (r *Router) callTask(ctx context.Context, req *Request, reply Reply) {
	id, ok, err := jsonx.GetString(req.Params, "taskId")
	if err != nil || !ok {
		reply(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: taskId is required"))
		return
	}
	e := r.tasks.get(id)
	// Under a policy a task belongs to the principal that created it.
	if e.owner == nil || (r.guard != nil && (e.principal == "" || e.principal != principalName(req))) {
		reply(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown task: %s", id))
		return
	}
	r.routeCall(ctx, &Call{Method: req.Method, Params: req.Params, Request: req, owner: e.owner,
		Target: &Target{Kind: TargetTask, Name: id, Original: id, Upstream: e.owner.name}}, reply)
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
	for _, b := range r.backends {
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
				id, ok, _ := jsonx.GetString(it, "taskId")
				if ok {
					r.tasks.record(id, b, "")
				}
				if r.guard == nil || (ok && r.tasks.get(id).principal == principalName(req) && principalName(req) != "") {
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
