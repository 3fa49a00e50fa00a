package router

import (
	"context"
	"sync"
	"time"
)

// TaskStore keeps, for every task the proxy has seen, where it lives and who created it:
// a task's later requests (tasks/get, tasks/result, tasks/cancel) carry only its id. The
// in-memory store (MemoryTasks) serves one process; a store shared by replicas (Redis)
// lets any of them route a task's requests.
//
// Concurrency: Put and Get are called concurrently, from the goroutines that answer
// calls and relay notifications.
//
// Errors: the router fails closed. A Get that fails answers the task's request with a
// proxy error (-32603, data.origin "mcp-proxy") and is logged; a task listing leaves out,
// under a policy, the tasks whose creator it cannot read. A Put that fails is logged:
// the result that created the task still reaches its client (the task exists upstream),
// but the task's later requests will not find it.
type TaskStore interface {
	// Put records owner for task id: a new task, or one seen again (listed, or named by
	// a status notification). The owner's Upstream and Session replace what was
	// recorded; an empty Principal keeps the principal recorded before (seeing a task
	// listed does not change who created it).
	//
	// ttl is how long the upstream keeps the task when it says (the task's ttl, counted
	// from its creation: an entry kept ttl from the Put outlives the task), else 0. A
	// store may forget the entry after ttl, and after a retention of its own when ttl
	// is 0; it may forget entries sooner to bound its size, least recently put first.
	Put(ctx context.Context, id string, owner TaskOwner, ttl time.Duration) error
	// Get returns the owner of task id; ok is false when it is not known (never seen,
	// or forgotten).
	Get(ctx context.Context, id string) (owner TaskOwner, ok bool, err error)
}

// TaskOwner is where a task lives and who created it.
type TaskOwner struct {
	// Upstream is the configured name of the upstream that created the task.
	Upstream string
	// Session names the upstream session that holds the task when it is not the
	// upstream's shared one (a per-client session, or one for a set of client
	// capabilities): such a session lives in one proxy process. The key is opaque and
	// means something only to the router that made it (it starts with a random prefix
	// of that router's own); empty for the shared session.
	Session string
	// Principal is who created the task; "" when the proxy only saw it listed.
	Principal string
	// Replica is, from Get, the proxy replica whose upstream session holds the task when
	// it is not this one: each replica has its own upstream processes and sessions, so a
	// task lives where it was created and its requests must go there. "" for this
	// replica, and outside a cluster. A shared store records the replica that Put (Put
	// ignores this field) and compares it with its own.
	Replica string
}

// MemoryTasks is the in-memory TaskStore: a map bounded at a number of tasks, which
// forgets the least recently seen first. It ignores ttl: the bound is on the count.
type MemoryTasks struct {
	max int

	mu    sync.Mutex // guards tasks
	tasks map[string]memoryTask
}

var _ TaskStore = (*MemoryTasks)(nil)

type memoryTask struct {
	TaskOwner
	seen time.Time
}

// maxTasks bounds the default task store.
const maxTasks = 10000

// NewMemoryTasks returns an in-memory store of at most max tasks (0: 10 000).
func NewMemoryTasks(max int) *MemoryTasks {
	if max <= 0 {
		max = maxTasks
	}
	return &MemoryTasks{max: max, tasks: map[string]memoryTask{}}
}

// Put implements TaskStore; it never fails.
func (m *MemoryTasks) Put(_ context.Context, id string, owner TaskOwner, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, known := m.tasks[id]
	if !known && len(m.tasks) >= m.max {
		var oldestID string
		var oldest time.Time
		for k, e := range m.tasks {
			if oldestID == "" || e.seen.Before(oldest) {
				oldestID, oldest = k, e.seen
			}
		}
		delete(m.tasks, oldestID)
	}
	if owner.Principal == "" {
		owner.Principal = old.Principal // a listing does not change who created it
	}
	m.tasks[id] = memoryTask{TaskOwner: owner, seen: time.Now()}
	return nil
}

// Get implements TaskStore; it never fails.
func (m *MemoryTasks) Get(_ context.Context, id string) (TaskOwner, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.tasks[id]
	return e.TaskOwner, ok, nil
}

// Len is the number of tasks kept.
func (m *MemoryTasks) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tasks)
}
