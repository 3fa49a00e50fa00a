package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
//	                   a = the tools the session's searches activated (an endpoint in
//	                       search mode), most recent first, a JSON array
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

	mu       sync.Mutex              // guards held and adopting
	held     map[string]heldState    // the sessions this replica holds and keeps alive in Redis, with their state
	adopting map[string]adoptedState // read by Adopt, until Opened: what the adopted session's hash said

	restore atomic.Bool // a write of a held session's hash failed: rewrite what is missing when Redis answers
}

// heldState is what this replica keeps in memory of a session it holds, so that it can
// write the session's hash again when Redis has lost it (a restart without
// persistence, a failover to a replica that had not had the write).
type heldState struct {
	level  string
	subs   []byte // JSON array
	active []byte // JSON array
}

type adoptedState struct {
	heldState
	at time.Time
}

// NewSessions makes the shared sessions of forwarder f's replica, sealed with sealer,
// whose idle sessions end after idle (the listener's session_idle). It has no side
// effects; f's Start starts the renewals.
func NewSessions(f *Forwarder, sealer *Sealer, idle time.Duration) *Sessions {
	s := &Sessions{f: f, sealer: sealer, prefix: f.keyPre[:len(f.keyPre)-len("replica:")] + "session:",
		log: f.log, held: map[string]heldState{}, adopting: map[string]adoptedState{}}
	s.every = max(min(idle/3, time.Minute), time.Second)
	s.ttl = idle + s.every + registryTTL
	f.sessions = s
	f.addRestorer(s)
	return s
}

var _ restorer = (*Sessions)(nil)

func (s *Sessions) pending() bool { return s.restore.Load() }
func (s *Sessions) kind() string  { return "sessions" }

// Key is the Redis key of session id's hash.
func (s *Sessions) Key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.prefix + hex.EncodeToString(sum[:16])
}

// NewID returns the id of a session this replica opens, with desc sealed into it; "" when
// desc cannot be sealed (too long): the caller then mints a plain id.
func (s *Sessions) NewID(desc []byte) string {
	id, err := s.sealer.Seal(s.f.id, sealedPayload(s.f.addr, desc))
	if err != nil {
		s.log.Warn().Err(err).Msg("cluster: a session's description is too long to seal; no other replica can adopt it")
		return ""
	}
	return id
}

// sealedPayload is what a session's id seals: the owner's advertised address, then the
// description. The address lets another replica reach the owner when the registry does
// not name it (Redis restarted empty, or cannot be reached): a zero byte, the address's
// length (one byte), the address, then desc. An id sealed before the address was
// (desc alone: JSON, never a zero byte first) still opens, without one.
func sealedPayload(addr string, desc []byte) []byte {
	if len(addr) > 255 {
		addr = "" // no host:port is this long; the registry alone names the owner then
	}
	b := make([]byte, 0, 2+len(addr)+len(desc))
	b = append(b, 0, byte(len(addr)))
	b = append(b, addr...)
	return append(b, desc...)
}

// openPayload splits what Open returned into the owner's address ("" : not sealed) and
// the description.
func openPayload(p []byte) (addr string, desc []byte, err error) {
	if len(p) == 0 || p[0] != 0 {
		return "", p, nil
	}
	if len(p) < 2 || len(p) < 2+int(p[1]) {
		return "", nil, ErrNotSealed
	}
	return string(p[2 : 2+int(p[1])]), p[2+int(p[1]):], nil
}

// open returns the owner, the owner's advertised address ("" when the id does not say)
// and the description sealed into id.
func (s *Sessions) open(id string) (owner, addr string, desc []byte, err error) {
	owner, p, err := s.sealer.Open(id)
	if err != nil {
		return "", "", nil, err
	}
	addr, desc, err = openPayload(p)
	return owner, addr, desc, err
}

var emptySubs = []byte("[]")

// jsonList encodes a list of strings for a hash field ("[]" for none).
func jsonList(list []string) []byte {
	if len(list) == 0 {
		return emptySubs
	}
	b, _ := json.Marshal(list)
	return b
}

// Opened records session id, just opened here (or just adopted), in Redis. A failure is
// logged: the session works, and its hash is written when Redis answers again (until
// then no other replica can adopt it).
func (s *Sessions) Opened(ctx context.Context, id string) {
	s.mu.Lock()
	st := heldState{subs: emptySubs, active: emptySubs}
	if a, ok := s.adopting[id]; ok {
		st = a.heldState
		delete(s.adopting, id)
	}
	s.held[id] = st
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.f.timeout)
	defer cancel()
	key := s.Key(id)
	_, err := s.f.redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "o", s.f.id)
		p.PExpire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		s.restore.Store(true)
		s.log.Warn().Err(err).Msg("cluster: cannot record a new session in redis; it is recorded when redis answers again (until then no other replica can adopt it)")
	}
}

// Changed records session id's state after a change (the whole state: the last write
// wins): its log level, its subscriptions and its activated tools. Called from a
// goroutine of the caller's; failures are logged.
func (s *Sessions) Changed(id, level string, subscriptions, active []string) {
	subs, act := jsonList(subscriptions), jsonList(active)
	s.mu.Lock()
	if _, ok := s.held[id]; ok {
		s.held[id] = heldState{level: level, subs: subs, active: act}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.f.timeout)
	defer cancel()
	key := s.Key(id)
	_, err := s.f.redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "l", level, "s", subs, "a", act)
		p.PExpire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		s.log.Warn().Err(err).Msg("cluster: cannot record a session's log level, subscriptions and activated tools in redis; a replica that adopts it will not have them")
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

// ErrNotAdoptable is returned by Adopt for a session this replica may not adopt.
var ErrNotAdoptable = errors.New("the session cannot be adopted")

// Adopt returns the description sealed into id and the state kept in Redis, when this
// replica has claimed the session (the forwarder does, when its holder is gone). The
// caller that then rebuilds the session calls Opened, so that this replica keeps it
// alive in Redis; one that does not (another principal's request) leaves it to expire.
func (s *Sessions) Adopt(ctx context.Context, id string) (desc []byte, level string, subscriptions, active []string, err error) {
	_, _, desc, err = s.open(id)
	if err != nil {
		return nil, "", nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.f.timeout)
	defer cancel()
	h, err := s.f.redis.HGetAll(ctx, s.Key(id)).Result()
	if err != nil {
		return nil, "", nil, nil, fmt.Errorf("reading the session's state: %w", err)
	}
	if h["o"] != s.f.id {
		return nil, "", nil, nil, ErrNotAdoptable
	}
	if v := h["s"]; v != "" {
		if err := json.Unmarshal([]byte(v), &subscriptions); err != nil {
			return nil, "", nil, nil, fmt.Errorf("reading the session's subscriptions: %w", err)
		}
	}
	if v := h["a"]; v != "" {
		if err := json.Unmarshal([]byte(v), &active); err != nil {
			return nil, "", nil, nil, fmt.Errorf("reading the session's activated tools: %w", err)
		}
	}
	st := heldState{level: h["l"], subs: jsonList(subscriptions), active: jsonList(active)}
	now := time.Now()
	s.mu.Lock()
	for k, a := range s.adopting { // an adoption not completed (another principal's request) is forgotten
		if now.Sub(a.at) > time.Minute {
			delete(s.adopting, k)
		}
	}
	s.adopting[id] = adoptedState{heldState: st, at: now}
	s.mu.Unlock()
	return desc, h["l"], subscriptions, active, nil
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

// restoreScript writes session KEYS[1]'s hash as its holder ARGV[1] keeps it (level
// ARGV[2], subscriptions ARGV[3], activated tools ARGV[5]) when Redis has none, and
// renews it (ARGV[4] ms) when it names ARGV[1]; it never touches a hash that names
// another replica (one that adopted the session). It returns 1 when it wrote the hash.
var restoreScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'o')
if not cur then
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'l', ARGV[2], 's', ARGV[3], 'a', ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return 1
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 0
`)

// restoreAll writes again the hashes of the sessions this replica holds that Redis has
// lost (restoreScript), in pipelined batches (restoreInBatches); it returns how many it
// wrote.
func (s *Sessions) restoreAll(ctx context.Context) (int, error) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.held))
	states := make([]heldState, 0, len(s.held))
	for id, st := range s.held {
		ids = append(ids, id)
		states = append(states, st)
	}
	s.mu.Unlock()
	s.restore.Store(false)
	wrote, err := restoreInBatches(ctx, s.f.redis, s.f.timeout, len(ids), func(ctx context.Context, p redis.Pipeliner, i int) {
		restoreScript.Eval(ctx, p, []string{s.Key(ids[i])}, s.f.id, states[i].level, states[i].subs, s.ttl.Milliseconds(), states[i].active)
	})
	if err != nil {
		s.restore.Store(true)
	}
	return wrote, err
}
