package router

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// TestMemoryTasksContract checks the in-memory store against TaskStore's contract.
func TestMemoryTasksContract(t *testing.T) {
	ctx := context.Background()
	type op struct {
		put   bool
		id    string
		owner TaskOwner // to put, or expected from get
		ok    bool      // expected from get
	}
	fs := TaskOwner{Upstream: "fs", Principal: "alice"}
	for _, tc := range []struct {
		name string
		max  int
		ops  []op
	}{
		{"unknown", 0, []op{{id: "t1"}}},
		{"put then get", 0, []op{
			{put: true, id: "t1", owner: fs},
			{id: "t1", owner: fs, ok: true},
			{id: "t2"},
		}},
		{"a listing keeps the creator and moves the task", 0, []op{
			{put: true, id: "t1", owner: fs},
			{put: true, id: "t1", owner: TaskOwner{Upstream: "fs2", Session: "s.1"}},
			{id: "t1", owner: TaskOwner{Upstream: "fs2", Session: "s.1", Principal: "alice"}, ok: true},
		}},
		{"a listed task has no creator", 0, []op{
			{put: true, id: "t1", owner: TaskOwner{Upstream: "fs"}},
			{id: "t1", owner: TaskOwner{Upstream: "fs"}, ok: true},
			{put: true, id: "t1", owner: fs}, // its creation seen after all
			{id: "t1", owner: fs, ok: true},
		}},
		{"bounded: the least recently seen goes first", 2, []op{
			{put: true, id: "t1", owner: fs},
			{put: true, id: "t2", owner: fs},
			{put: true, id: "t1", owner: fs}, // seen again: t2 is now the oldest, nothing goes
			{id: "t2", owner: fs, ok: true},
			{put: true, id: "t3", owner: fs},
			{id: "t2"},
			{id: "t1", owner: fs, ok: true},
			{id: "t3", owner: fs, ok: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemoryTasks(tc.max)
			for i, o := range tc.ops {
				if o.put {
					if err := m.Put(ctx, o.id, o.owner, time.Minute); err != nil {
						t.Fatalf("op %d: put: %v", i, err)
					}
					time.Sleep(time.Millisecond) // distinct times seen
					continue
				}
				got, ok, err := m.Get(ctx, o.id)
				if err != nil || ok != o.ok || got != o.owner {
					t.Fatalf("op %d: get %s = %+v %v %v; want %+v %v", i, o.id, got, ok, err, o.owner, o.ok)
				}
			}
			if tc.max > 0 && m.Len() > tc.max {
				t.Errorf("%d tasks kept, bound %d", m.Len(), tc.max)
			}
		})
	}
}

// recordingTasks is a TaskStore that records the router's puts, keeps them in memory,
// and fails when told to.
type recordingTasks struct {
	MemoryTasks
	mu      sync.Mutex
	puts    []recordedPut
	failPut error
	failGet error
}

type recordedPut struct {
	id    string
	owner TaskOwner
	ttl   time.Duration
}

var _ TaskStore = (*recordingTasks)(nil)

func newRecordingTasks() *recordingTasks { return &recordingTasks{MemoryTasks: *NewMemoryTasks(0)} }

func (s *recordingTasks) Put(ctx context.Context, id string, owner TaskOwner, ttl time.Duration) error {
	s.mu.Lock()
	s.puts = append(s.puts, recordedPut{id, owner, ttl})
	err := s.failPut
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.MemoryTasks.Put(ctx, id, owner, ttl)
}

func (s *recordingTasks) Get(ctx context.Context, id string) (TaskOwner, bool, error) {
	s.mu.Lock()
	err := s.failGet
	s.mu.Unlock()
	if err != nil {
		return TaskOwner{}, false, err
	}
	return s.MemoryTasks.Get(ctx, id)
}

func (s *recordingTasks) lastPut() recordedPut {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.puts) == 0 {
		return recordedPut{}
	}
	return s.puts[len(s.puts)-1]
}

func (s *recordingTasks) fail(put, get error) {
	s.mu.Lock()
	s.failPut, s.failGet = put, get
	s.mu.Unlock()
}

const taskResult = `{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t1","status":"working","ttl":60000}}}`

// TestTaskStoreThroughRouter: the router records a task's owner by upstream name, with
// its creator and ttl, routes the task's requests by what the store says, and fails
// closed when the store fails.
func TestTaskStoreThroughRouter(t *testing.T) {
	store := newRecordingTasks()
	f := newFake("fs", "slow")
	f.resp = []byte(taskResult)
	r := newTestRouter(t, Options{Tasks: store}, nsUp{f, "fs"})
	ctx := context.Background()
	alice := &principal.Principal{Name: "alice"}

	res, err := r.Call(ctx, &Request{Method: mcp.MethodToolsCall, Principal: alice,
		Params: json.RawMessage(`{"name":"fs__slow","task":{"ttl":60000}}`)})
	if err != nil || !strings.Contains(string(res), `"taskId":"t1"`) {
		t.Fatalf("task-augmented call: %s %v", res, err)
	}
	if got, want := store.lastPut(), (recordedPut{"t1", TaskOwner{Upstream: "fs", Principal: "alice"}, time.Minute}); got != want {
		t.Errorf("put %+v, want %+v", got, want)
	}

	f.resp = []byte(`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t1","status":"completed"}}`)
	if res, err := call(t, r, mcp.MethodTasksGet, `{"taskId":"t1"}`); err != nil || !strings.Contains(string(res), "completed") {
		t.Fatalf("tasks/get: %s %v", res, err)
	}
	if last := f.lastCall(); last == nil || last.Method != mcp.MethodTasksGet {
		t.Fatalf("tasks/get did not reach the owner: %+v", last)
	}

	// The store fails a lookup: the request is refused with a proxy error and does not
	// reach the upstream.
	store.fail(nil, errors.New("redis: i/o timeout"))
	f.calls = nil
	_, err = call(t, r, mcp.MethodTasksResult, `{"taskId":"t1"}`)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(string(je.Data), `"origin":"mcp-proxy"`) ||
		strings.Contains(je.Message, "redis") {
		t.Errorf("lookup failure: %v; want a proxy error (-32603) that does not show the store's error", err)
	}
	if f.lastCall() != nil {
		t.Error("a task request went upstream although its owner could not be looked up")
	}

	// The store fails to record: the result still reaches the client, and the task is
	// unknown later.
	store.fail(errors.New("redis: i/o timeout"), nil)
	f.resp = []byte(strings.Replace(taskResult, `"t1"`, `"t9"`, 1))
	if res, err := call(t, r, mcp.MethodToolsCall, `{"name":"fs__slow","task":{}}`); err != nil || !strings.Contains(string(res), "t9") {
		t.Fatalf("the result of a task whose owner could not be recorded: %s %v", res, err)
	}
	store.fail(nil, nil)
	if _, err := call(t, r, mcp.MethodTasksGet, `{"taskId":"t9"}`); !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unrecorded task: %v; want -32602", err)
	}

	// An owner naming an upstream this router does not have is an unknown task.
	_ = store.MemoryTasks.Put(ctx, "t5", TaskOwner{Upstream: "elsewhere"}, 0)
	if _, err := call(t, r, mcp.MethodTasksGet, `{"taskId":"t5"}`); !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("task of an unknown upstream: %v; want -32602", err)
	}
}

// sessionClient is a client session for per-client tests.
type sessionClient struct{}

func (sessionClient) Notify(string, json.RawMessage) {}
func (sessionClient) Cork()                          {}
func (sessionClient) Uncork()                        {}
func (sessionClient) Request(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	return nil, nil
}

// TestTaskStorePerClientSession: a task created in a client's own upstream session is
// recorded with that session's opaque key, its requests go back to that session, and
// once the session has ended (or when the key is another replica's) the client is told
// so rather than the request going to another session.
func TestTaskStorePerClientSession(t *testing.T) {
	store := newRecordingTasks()
	catalogue := newFake("fs", "slow")
	var mu sync.Mutex
	var sessions []*fakeUpstream
	r := New(Options{Tasks: store}, zerolog.Nop())
	r.AddPerClient(catalogue, "fs", PerClient{New: func(json.RawMessage, upstream.Events) Upstream {
		f := newFake("fs", "slow")
		f.resp = []byte(taskResult)
		mu.Lock()
		sessions = append(sessions, f)
		mu.Unlock()
		return f
	}})
	r.rebuild()
	client := &sessionClient{}
	res, err := r.Call(context.Background(), &Request{Method: mcp.MethodToolsCall, Session: client,
		Params: json.RawMessage(`{"name":"fs__slow","task":{}}`)})
	if err != nil || !strings.Contains(string(res), "t1") {
		t.Fatalf("call: %s %v", res, err)
	}
	put := store.lastPut()
	if put.owner.Upstream != "fs" || put.owner.Session == "" || !strings.HasPrefix(put.owner.Session, r.tasks.prefix) {
		t.Fatalf("the task's owner %+v does not name the client's session", put.owner)
	}

	sessions[0].resp = []byte(`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t1","status":"completed"}}`)
	if _, err := r.Call(context.Background(), &Request{Method: mcp.MethodTasksGet, Session: client,
		Params: json.RawMessage(`{"taskId":"t1"}`)}); err != nil {
		t.Fatal(err)
	}
	if sessions[0].lastCall() == nil || sessions[0].lastCall().Method != mcp.MethodTasksGet || catalogue.lastCall() != nil {
		t.Fatal("tasks/get did not go to the session that holds the task")
	}

	// Another replica's session: the key is not this router's.
	_ = store.MemoryTasks.Put(context.Background(), "t7", TaskOwner{Upstream: "fs", Session: "elsewhere.1"}, 0)
	var je *jsonrpc.Error
	if _, err := call(t, r, mcp.MethodTasksGet, `{"taskId":"t7"}`); !errors.As(err, &je) || je.Code != mcp.CodeUpstreamUnavailable ||
		!strings.Contains(je.Message, "another mcp-proxy replica") {
		t.Errorf("another replica's session: %v", err)
	}

	// The client's session ends: its task's requests are told so.
	r.Release(client)
	if _, err := call(t, r, mcp.MethodTasksGet, `{"taskId":"t1"}`); !errors.As(err, &je) || je.Code != mcp.CodeUpstreamUnavailable ||
		!strings.Contains(je.Message, "has ended") {
		t.Errorf("ended session: %v", err)
	}
	if catalogue.lastCall() != nil {
		t.Error("a task of an ended session went to the catalogue session")
	}
	r.Close()
}
