package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Sessions makes legacy sessions adoptable: what a session is (fixed at initialize) is
// sealed into its id (Sealer), and what changes after initialize (the log level, the
// resources/subscribe subscriptions) is kept in Redis, in one hash per session:
//
//	PREFIX session:H   o = the replica that holds the session (its owner, or its adopter)
//	                   l = the log level the client set ("" : none)
//	                   s = the URIs the client subscribed to, a JSON array
//
// H is a digest of the session id. The hash is written when the session is opened and
// when its state changes, never on a call's path; it expires after the listener's
// session_idle (plus the renewal period and the registry's expiry), and the replica that holds the session
// renews it in the background while the session lives; DELETE and idle expiry remove it.
// A session without a hash (deleted, expired, or opened while Redis was down) cannot be
// adopted.
//
// When a session's holder is gone, the replica that receives its next request claims it
// (one Lua script, atomic: exactly one replica wins) and adopts it (server.SessionShare).
// Sessions implements server.SessionShare (its methods use no server type, so that
// this package does not import the front end). Make it with NewSessions; the Forwarder
// it is given starts and stops its renewals.
type Sessions struct {
	f      *Forwarder
	sealer *Sealer
	ttl    time.Duration // of a session's hash: it outlives the session's last use by session_idle at least
	every  time.Duration // how often the held sessions' hashes are renewed
	prefix string
	log    zerolog.Logger

	mu   sync.Mutex          // guards held
	held map[string]struct{} // the ids of the sessions this replica holds and keeps alive in Redis
}

// NewSessions makes the shared sessions of forwarder f's replica, sealed with sealer,
// whose idle sessions end after idle (the listener's session_idle). It has no side
// effects; f's Start starts the renewals.
func NewSessions(f *Forwarder, sealer *Sealer, idle time.Duration) *Sessions {
	s := &Sessions{f: f, sealer: sealer, prefix: f.keyPre[:len(f.keyPre)-len("replica:")] + "session:",
		log: f.log, held: map[string]struct{}{}}
	s.every = max(min(idle/3, time.Minute), time.Second)
	s.ttl = idle + s.every + registryTTL
	f.sessions = s
	return s
}

// Key is the Redis key of session id's hash.
func (s *Sessions) Key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.prefix + hex.EncodeToString(sum[:16])
}

// NewID returns the id of a session this replica opens, with desc sealed into it; "" when
// desc cannot be sealed (too long): the caller then mints a plain id.
func (s *Sessions) NewID(desc []byte) string {
	id, err := s.sealer.Seal(s.f.id, desc)
	if err != nil {
		s.log.Warn().Err(err).Msg("cluster: a session's description is too long to seal; no other replica can adopt it")
		return ""
	}
	return id
}

// Opened records session id, just opened here, in Redis. A failure is logged: the session
// works, but no other replica can adopt it.
func (s *Sessions) Opened(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, s.f.timeout)
	defer cancel()
	key := s.Key(id)
	_, err := s.f.redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "o", s.f.id)
		p.PExpire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		s.log.Warn().Err(err).Msg("cluster: cannot record a new session in redis; no other replica can adopt it if this one stops")
		return
	}
	s.hold(id)
}

// Changed records session id's state after a change (the whole state: the last write
// wins). Called from a goroutine of the caller's; failures are logged.
func (s *Sessions) Changed(id, level string, subscriptions []string) {
	subs, _ := json.Marshal(subscriptions)
	if subscriptions == nil {
		subs = []byte("[]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.f.timeout)
	defer cancel()
	key := s.Key(id)
	_, err := s.f.redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "l", level, "s", subs)
		p.PExpire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		s.log.Warn().Err(err).Msg("cluster: cannot record a session's log level and subscriptions in redis; a replica that adopts it will not have them")
	}
}

// Ended removes session id's state: DELETE or idle expiry ended it, and no replica may
// adopt it any more.
func (s *Sessions) Ended(ctx context.Context, id string) {
	s.mu.Lock()
	delete(s.held, id)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.f.timeout)
	defer cancel()
	if err := s.f.redis.Del(ctx, s.Key(id)).Err(); err != nil {
		s.log.Warn().Err(err).Msg("cluster: cannot remove an ended session's state from redis; it expires by itself")
	}
}

func (s *Sessions) hold(id string) {
	s.mu.Lock()
	s.held[id] = struct{}{}
	s.mu.Unlock()
}

// ErrNotAdoptable is returned by Adopt for a session this replica may not adopt.
var ErrNotAdoptable = errors.New("the session cannot be adopted")

// Adopt returns the description sealed into id and the state kept in Redis, when this
// replica has claimed the session (the forwarder does, when its holder is gone). The
// caller that then rebuilds the session calls Opened, so that this replica keeps it
// alive in Redis; one that does not (another principal's request) leaves it to expire.
func (s *Sessions) Adopt(ctx context.Context, id string) (desc []byte, level string, subscriptions []string, err error) {
	_, desc, err = s.sealer.Open(id)
	if err != nil {
		return nil, "", nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.f.timeout)
	defer cancel()
	h, err := s.f.redis.HGetAll(ctx, s.Key(id)).Result()
	if err != nil {
		return nil, "", nil, fmt.Errorf("reading the session's state: %w", err)
	}
	if h["o"] != s.f.id {
		return nil, "", nil, ErrNotAdoptable
	}
	if v := h["s"]; v != "" {
		if err := json.Unmarshal([]byte(v), &subscriptions); err != nil {
			return nil, "", nil, fmt.Errorf("reading the session's subscriptions: %w", err)
		}
	}
	return desc, h["l"], subscriptions, nil
}

// claimScript hands session KEYS[1] to replica ARGV[1] when its holder is ARGV[2] (known
// gone) and returns the holder after that: ARGV[1] when it won, another replica when one
// claimed it first; false when the session has no state (ended, expired, never
// recorded). ARGV[3] is the hash's expiry in ms.
var claimScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'o')
if not cur then
  return false
end
if cur == ARGV[2] then
  redis.call('HSET', KEYS[1], 'o', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return ARGV[1]
end
return cur
`)

// claim hands session id, whose holder gone is gone, to this replica unless another has
// claimed it already; it returns the holder now ("" when the session cannot be adopted).
func (s *Sessions) claim(ctx context.Context, id, gone string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.f.timeout)
	defer cancel()
	v, err := claimScript.Run(ctx, s.f.redis, []string{s.Key(id)}, s.f.id, gone, s.ttl.Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// renew extends the expiry of the sessions this replica holds (one pipelined round trip).
func (s *Sessions) renew() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.f.timeout+time.Duration(len(ids))*time.Microsecond*10)
	defer cancel()
	_, err := s.f.redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.PExpire(ctx, s.Key(id), s.ttl)
		}
		return nil
	})
	if err != nil {
		s.log.Warn().Err(err).Int("sessions", len(ids)).Msg("cluster: cannot renew this replica's sessions in redis")
	}
}
