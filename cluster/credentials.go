package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/credential"
)

// RedisCredentials is the token store the replicas share (credential.Store): every
// replica serves a principal's grant, whichever obtained it, and a refresh happens once
// (a lease). Everything in it is sealed with the token store's key (credential.Sealer,
// AES-256-GCM bound to the grant's upstream and principal, or to the flow's id): Redis
// and whoever reads its memory or its dumps see no token.
//
// A grant is the hash PREFIX cred:SHA256(upstream NUL principal) with the fields u, p
// (the names, for List) and g (the sealed grant); one that cannot be refreshed expires
// with its token (or when the principal's exchanged token does, Grant.Ends). A flow in progress is PREFIX credflow:SHA256(id), sealed, expiring
// with the flow; TakeFlow is GETDEL. A lease is PREFIX credlease:…, SET NX PX with a
// token of its holder's, released by a script that deletes it only while it holds that
// token. Each operation is one round trip on one key (Redis Cluster too), List excepted
// (a SCAN, for the admin listener only). The proxy reads the store on a miss of its own
// cache, never per call.
//
// It is a credential.Broadcaster: a change (a revocation, a secret set, an authorization
// completed) is PUBLISHed on PREFIX credchanges, which every replica SUBSCRIBEs to, so
// that each drops what it caches of the principal's credential at once; a cache hit
// still makes no round trip. A message names the upstream and the principal's identity
// (and a hash of a completed flow's id), never a token.
type RedisCredentials struct {
	client redis.UniversalClient
	prefix string
	sealer *credential.Sealer
	origin string // this store's own id: its own messages are not handed back to it
}

var (
	_ credential.Store       = (*RedisCredentials)(nil)
	_ credential.Broadcaster = (*RedisCredentials)(nil)
)

// NewRedisCredentials returns the store over client (closed by Close), with every key
// under prefix, sealed by sealer. It has no side effects.
func NewRedisCredentials(client redis.UniversalClient, prefix string, sealer *credential.Sealer) *RedisCredentials {
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	return &RedisCredentials{client: client, prefix: prefix, sealer: sealer, origin: hex.EncodeToString(id)}
}

// changes is the channel the changes are published on.
func (s *RedisCredentials) changes() string { return s.prefix + "credchanges" }

// changeMsg is a credential.Change on the wire.
type changeMsg struct {
	Origin    string `json:"o"`
	Kind      string `json:"k"`
	Upstream  string `json:"u,omitempty"`
	Principal string `json:"p,omitempty"`
	Flow      string `json:"f,omitempty"`
}

// Publish implements credential.Broadcaster: one PUBLISH.
func (s *RedisCredentials) Publish(ctx context.Context, c credential.Change) error {
	b, err := json.Marshal(changeMsg{Origin: s.origin, Kind: c.Kind, Upstream: c.Upstream, Principal: c.Principal, Flow: c.Flow})
	if err != nil {
		return err
	}
	if err := s.client.Publish(ctx, s.changes(), b).Err(); err != nil {
		return fmt.Errorf("publishing a credential change in redis: %w", err)
	}
	return nil
}

// subscribeIdle is how long the subscription may hear nothing before it is pinged (a
// connection that died silently is found within it).
const subscribeIdle = 30 * time.Second

// Subscribe implements credential.Broadcaster: it SUBSCRIBEs until ctx ends. When the
// connection breaks, go-redis connects and subscribes again; since what was published
// meanwhile is lost, resync is called once the subscription is back.
func (s *RedisCredentials) Subscribe(ctx context.Context, fn func(credential.Change), resync func()) {
	ps := s.client.Subscribe(ctx, s.changes())
	stop := context.AfterFunc(ctx, func() { ps.Close() }) // ends a Receive in progress
	defer func() {
		stop()
		ps.Close()
	}()
	subscribed := false
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, subscribeIdle)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if ps.Ping(ctx) == nil {
					continue
				}
			}
			select { // Redis unreachable: try again, without spinning
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if subscribed {
					resync() // subscribed again: what was published meanwhile is lost
				}
				subscribed = true
			}
		case *redis.Message:
			var c changeMsg
			if json.Unmarshal([]byte(m.Payload), &c) != nil || c.Origin == s.origin {
				continue
			}
			fn(credential.Change{Kind: c.Kind, Upstream: c.Upstream, Principal: c.Principal, Flow: c.Flow})
		}
	}
}

func (s *RedisCredentials) grantKey(up, p string) string {
	sum := sha256.Sum256([]byte(up + "\x00" + p))
	return s.prefix + "cred:" + hex.EncodeToString(sum[:])
}

func (s *RedisCredentials) flowKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.prefix + "credflow:" + hex.EncodeToString(sum[:])
}

// Get implements credential.Store.
func (s *RedisCredentials) Get(ctx context.Context, up, p string) (*credential.Grant, error) {
	b, err := s.client.HGet(ctx, s.grantKey(up, p), "g").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading a grant from redis: %w", err)
	}
	g, err := s.sealer.OpenGrant(b, up, p)
	if err != nil {
		return nil, fmt.Errorf("a grant in redis: %w", err)
	}
	return g, nil
}

// Put implements credential.Store.
func (s *RedisCredentials) Put(ctx context.Context, g *credential.Grant) error {
	b, err := s.sealer.SealGrant(g)
	if err != nil {
		return err
	}
	k := s.grantKey(g.Upstream, g.Principal)
	_, err = s.client.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		pl.HSet(ctx, k, "u", g.Upstream, "p", g.Principal, "g", b)
		if end := g.Ends(); !end.IsZero() && g.RefreshToken.IsZero() && len(g.Secrets) == 0 {
			pl.PExpireAt(ctx, k, end.Add(time.Minute))
		} else {
			pl.Persist(ctx, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing a grant in redis: %w", err)
	}
	return nil
}

// Delete implements credential.Store.
func (s *RedisCredentials) Delete(ctx context.Context, up, p string) error {
	if err := s.client.Del(ctx, s.grantKey(up, p)).Err(); err != nil {
		return fmt.Errorf("deleting a grant in redis: %w", err)
	}
	return nil
}

// List implements credential.Store: a SCAN of the grants' keys (on every master of a
// Redis Cluster), each opened.
func (s *RedisCredentials) List(ctx context.Context, up, p string) ([]credential.Info, error) {
	scan := func(ctx context.Context, c redis.Cmdable) ([]credential.Info, error) {
		var out []credential.Info
		iter := c.Scan(ctx, 0, s.prefix+"cred:*", 256).Iterator()
		for iter.Next(ctx) {
			m, err := c.HGetAll(ctx, iter.Val()).Result()
			if err != nil {
				return nil, err
			}
			if m["u"] == "" || (up != "" && m["u"] != up) || (p != "" && m["p"] != p) {
				continue
			}
			g, err := s.sealer.OpenGrant([]byte(m["g"]), m["u"], m["p"])
			if err != nil {
				continue // sealed with a key this replica no longer has: nothing to show
			}
			out = append(out, g.Info())
		}
		return out, iter.Err()
	}
	var out []credential.Info
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		var mu sync.Mutex // guards out
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			part, e := scan(ctx, c)
			mu.Lock()
			out = append(out, part...)
			mu.Unlock()
			return e
		})
	} else {
		out, err = scan(ctx, s.client)
	}
	if err != nil {
		return nil, fmt.Errorf("listing grants in redis: %w", err)
	}
	credential.SortInfos(out)
	return out, nil
}

// releaseLease deletes a lease only while it is still the holder's.
var releaseLease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Lease implements credential.Store.
func (s *RedisCredentials) Lease(ctx context.Context, up, p string, ttl time.Duration) (func(), bool, error) {
	sum := sha256.Sum256([]byte(up + "\x00" + p))
	k := s.prefix + "credlease:" + hex.EncodeToString(sum[:])
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	holder := hex.EncodeToString(tok)
	ok, err := s.client.SetNX(ctx, k, holder, ttl).Result()
	if err != nil {
		return nil, false, fmt.Errorf("taking a lease in redis: %w", err)
	}
	if !ok {
		return nil, false, nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = releaseLease.Run(ctx, s.client, []string{k}, holder).Err() // it expires anyway
	}, true, nil
}

// PutFlow implements credential.Store.
func (s *RedisCredentials) PutFlow(ctx context.Context, f *credential.Flow) error {
	b, err := s.sealer.SealFlow(f)
	if err != nil {
		return err
	}
	ttl := time.Until(f.Expires)
	if ttl <= 0 {
		return nil
	}
	if err := s.client.Set(ctx, s.flowKey(f.ID), b, ttl).Err(); err != nil {
		return fmt.Errorf("storing a flow in redis: %w", err)
	}
	return nil
}

// GetFlow implements credential.Store.
func (s *RedisCredentials) GetFlow(ctx context.Context, id string) (*credential.Flow, error) {
	return s.openFlow(s.client.Get(ctx, s.flowKey(id)).Bytes())(id)
}

// TakeFlow implements credential.Store.
func (s *RedisCredentials) TakeFlow(ctx context.Context, id string) (*credential.Flow, error) {
	return s.openFlow(s.client.GetDel(ctx, s.flowKey(id)).Bytes())(id)
}

func (s *RedisCredentials) openFlow(b []byte, err error) func(string) (*credential.Flow, error) {
	return func(id string) (*credential.Flow, error) {
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading a flow from redis: %w", err)
		}
		f, err := s.sealer.OpenFlow(b, id)
		if err != nil {
			return nil, nil // not ours (another key): as if there were none
		}
		if !time.Now().Before(f.Expires) {
			return nil, nil
		}
		return f, nil
	}
}

// Close implements credential.Store.
func (s *RedisCredentials) Close() error { return s.client.Close() }
