package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
type RedisTasks struct {
	client  redis.Cmdable
	prefix  string
	replica string // this replica's id (Forwarder.ID)
}

var _ router.TaskStore = (*RedisTasks)(nil)

// NewRedisTasks returns the store of replica over client, with every key under prefix.
// It has no side effects.
func NewRedisTasks(client redis.Cmdable, prefix, replica string) *RedisTasks {
	return &RedisTasks{client: client, prefix: prefix + "task:", replica: replica}
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
		return fmt.Errorf("recording task in redis: %w", err)
	}
	return nil
}

// Get implements router.TaskStore.
func (s *RedisTasks) Get(ctx context.Context, id string) (router.TaskOwner, bool, error) {
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
