package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/router"
)

// taskRetention is how long the store keeps a task whose upstream said no ttl.
const taskRetention = 24 * time.Hour

// RedisTasks is a router.TaskStore in Redis, shared by the replicas: which upstream
// (and which upstream session) holds a task, who created it, and which replica Put it.
// Each replica has its own upstream processes and sessions, so a task lives on the
// replica that saw it created; Get names that replica when it is another
// (router.TaskOwner.Replica), and the front end forwards the task's requests there.
//
// A task is one hash, PREFIX task:SHA256(id) (the id is the upstream's, or a client's in
// tasks/get: hashed, a key has a bounded length whatever it sends), with the fields
// upstream, session, principal and replica, expiring ttl after the last Put (the task's
// ttl when the upstream gave one, else taskRetention). Put is one round trip (a
// transaction of HSET and PEXPIRE), Get one (HGETALL); each touches one key, so both work
// on Redis Cluster. Errors are Redis's, returned: the router fails closed on them.
//
// Made by NewTasks (of a Forwarder), the store also survives Redis losing its hashes (a
// restart without persistence): it keeps in memory what it Put (at most
// maxHeldTasks, until each entry's expiry), writes again the hashes Redis lost when the
// forwarder finds the registry lost (restoreAll: only a missing hash, never one another
// replica wrote), answers Get of such a task from memory, and, asked for a task Redis
// does not have while Redis may just have lost it, waits for its replica to write it
// again (Forwarder.awaitRecovery) before saying it does not know it. None of this costs
// anything on the path of a call without a task.
type RedisTasks struct {
	client  redis.Cmdable
	prefix  string
	replica string     // this replica's id (Forwarder.ID)
	f       *Forwarder // nil (NewRedisTasks): no waiting for a lost hash

	mu      sync.Mutex           // guards held and missed
	held    map[string]heldTask  // the tasks this replica Put, by id
	missed  map[string]time.Time // ids waited for in vain, when: not waited for again for awaitFor
	restore atomic.Bool          // a Put failed: write what Redis lacks when it answers again
}

// heldTask is what this replica Put of a task, kept to write its hash again.
type heldTask struct {
	upstream, session, principal string
	expires                      time.Time
}

// maxHeldTasks bounds the tasks a replica keeps in memory to write again; beyond it, the
// expired and then arbitrary ones are forgotten (their hashes are not written again
// after Redis lost them).
const maxHeldTasks = 50000

// maxMissed bounds the ids remembered as waited for in vain.
const maxMissed = 1024

var (
	_ router.TaskStore = (*RedisTasks)(nil)
	_ restorer         = (*RedisTasks)(nil)
)

// NewRedisTasks returns the store of replica over client, with every key under prefix.
// It has no side effects.
func NewRedisTasks(client redis.Cmdable, prefix, replica string) *RedisTasks {
	return &RedisTasks{client: client, prefix: prefix + "task:", replica: replica,
		held: map[string]heldTask{}, missed: map[string]time.Time{}}
}

// NewTasks returns the task store of forwarder f's replica, over its Redis client and
// under its key prefix; f writes its tasks again when Redis has lost them. It has no
// side effects.
func NewTasks(f *Forwarder) *RedisTasks {
	s := NewRedisTasks(f.redis, strings.TrimSuffix(f.keyPre, "replica:"), f.id)
	s.f = f
	f.addRestorer(s)
	return s
}

func (s *RedisTasks) key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.prefix + hex.EncodeToString(sum[:])
}

// Put implements router.TaskStore: the owner is recorded as this replica's; an empty
// Principal keeps the one recorded before.
func (s *RedisTasks) Put(ctx context.Context, id string, owner router.TaskOwner, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = taskRetention
	}
	s.hold(id, owner, ttl)
	k := s.key(id)
	fields := []any{"upstream", owner.Upstream, "session", owner.Session, "replica", s.replica}
	if owner.Principal != "" {
		fields = append(fields, "principal", owner.Principal)
	}
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k, fields...)
		p.PExpire(ctx, k, ttl)
		return nil
	})
	if err != nil {
		s.restore.Store(true)
		return fmt.Errorf("recording task in redis: %w", err)
	}
	return nil
}

// hold keeps what Put records of task id in memory.
func (s *RedisTasks) hold(id string, owner router.TaskOwner, ttl time.Duration) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	old, known := s.held[id]
	if owner.Principal == "" {
		owner.Principal = old.principal
	}
	if !known && len(s.held) >= maxHeldTasks {
		for k, t := range s.held {
			if now.After(t.expires) {
				delete(s.held, k)
			}
		}
		for k := range s.held { // still full: an eighth goes, in the map's (arbitrary) order
			if len(s.held) < maxHeldTasks*7/8 {
				break
			}
			delete(s.held, k)
		}
	}
	s.held[id] = heldTask{upstream: owner.Upstream, session: owner.Session, principal: owner.Principal, expires: now.Add(ttl)}
}

// Get implements router.TaskStore. A task Redis does not have is this replica's when it
// Put it (Redis lost the hash; the next registration writes it again); another's, when
// Redis may just have lost it and its replica writes it again within awaitFor.
func (s *RedisTasks) Get(ctx context.Context, id string) (router.TaskOwner, bool, error) {
	o, ok, err := s.get(ctx, id)
	if ok || err != nil {
		return o, ok, err
	}
	if o, ok := s.mine(id); ok {
		return o, true, nil
	}
	if s.f == nil || !s.await(id) {
		return router.TaskOwner{}, false, nil
	}
	err = s.f.awaitRecovery(ctx, func(ctx context.Context) (bool, error) {
		o, ok, err = s.get(ctx, id)
		return ok, err
	})
	if ok {
		return o, true, nil
	}
	if err != nil {
		return router.TaskOwner{}, false, err
	}
	s.mu.Lock()
	if len(s.missed) < maxMissed {
		s.missed[id] = time.Now()
	}
	s.mu.Unlock()
	return router.TaskOwner{}, false, nil
}

// get reads task id's hash.
func (s *RedisTasks) get(ctx context.Context, id string) (router.TaskOwner, bool, error) {
	m, err := s.client.HGetAll(ctx, s.key(id)).Result()
	if err != nil {
		return router.TaskOwner{}, false, fmt.Errorf("reading task from redis: %w", err)
	}
	if len(m) == 0 || m["upstream"] == "" {
		return router.TaskOwner{}, false, nil
	}
	o := router.TaskOwner{Upstream: m["upstream"], Session: m["session"], Principal: m["principal"]}
	if r := m["replica"]; r != s.replica {
		o.Replica = r
	}
	return o, true, nil
}

// mine is task id as this replica Put it, unless expired.
func (s *RedisTasks) mine(id string) (router.TaskOwner, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.held[id]
	if !ok || time.Now().After(t.expires) {
		return router.TaskOwner{}, false
	}
	return router.TaskOwner{Upstream: t.upstream, Session: t.session, Principal: t.principal}, true
}

// await reports whether a Get of task id, missing in Redis, may wait for it: not when it
// was waited for in vain within awaitFor (a task's request asks the store twice: the
// front end, for the replica to forward to, then the router).
func (s *RedisTasks) await(id string) bool {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, at := range s.missed {
		if now.Sub(at) >= awaitFor {
			delete(s.missed, k)
		}
	}
	_, missed := s.missed[id]
	return !missed
}

func (s *RedisTasks) pending() bool { return s.restore.Load() }
func (s *RedisTasks) kind() string  { return "tasks" }

// restoreTaskScript writes task KEYS[1]'s hash as replica ARGV[1] recorded it (upstream
// ARGV[2], session ARGV[3], principal ARGV[4], "" for none) with an expiry of ARGV[5] ms,
// when Redis has none; when it has one of ARGV[1]'s without a principal (a listing Put it
// again since), it adds the principal. It never touches another replica's hash. It
// returns 1 when it wrote the hash.
var restoreTaskScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'upstream', ARGV[2], 'session', ARGV[3], 'replica', ARGV[1])
  if ARGV[4] ~= '' then
    redis.call('HSET', KEYS[1], 'principal', ARGV[4])
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
if ARGV[4] ~= '' and redis.call('HGET', KEYS[1], 'replica') == ARGV[1] then
  redis.call('HSETNX', KEYS[1], 'principal', ARGV[4])
end
return 0
`)

// restoreAll writes again the hashes of the tasks this replica Put that Redis has lost
// (restoreTaskScript), in pipelined batches of EVAL (as Sessions.restoreAll), forgetting
// the expired ones; it returns how many it wrote.
func (s *RedisTasks) restoreAll(ctx context.Context) (int, error) {
	now := time.Now()
	s.mu.Lock()
	ids := make([]string, 0, len(s.held))
	tasks := make([]heldTask, 0, len(s.held))
	for id, t := range s.held {
		if now.After(t.expires) {
			delete(s.held, id)
			continue
		}
		ids = append(ids, id)
		tasks = append(tasks, t)
	}
	s.mu.Unlock()
	s.restore.Store(false)
	wrote, err := restoreInBatches(ctx, s.client, s.timeout(), len(ids), func(ctx context.Context, p redis.Pipeliner, i int) {
		t := tasks[i]
		ms := max(time.Until(t.expires).Milliseconds(), 1)
		restoreTaskScript.Eval(ctx, p, []string{s.key(ids[i])}, s.replica, t.upstream, t.session, t.principal, ms)
	})
	if err != nil {
		s.restore.Store(true)
	}
	return wrote, err
}

// timeout is the forwarder's Redis timeout (one second without a forwarder).
func (s *RedisTasks) timeout() time.Duration {
	if s.f == nil {
		return time.Second
	}
	return s.f.timeout
}
