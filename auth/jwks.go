package auth

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/rs/zerolog"
)

// maxJWKSSize bounds the JWKS document we read.
const maxJWKSSize = 1 << 20

// minRSABits is the smallest RSA key we trust.
const minRSABits = 2048

// jwksCache holds the issuer's signing keys. It fetches them in the background when
// created and every refresh interval after, and on demand when a token names a key it
// does not have — at most once per minimum interval, so a flood of tokens with made-up
// key ids costs the issuer one request per interval. A failed fetch keeps the keys it
// had: an unreachable issuer does not lock everyone out.
type jwksCache struct {
	url      string
	client   *http.Client
	every    time.Duration
	minEvery time.Duration
	log      zerolog.Logger

	mu   sync.RWMutex
	keys []jose.JSONWebKey // usable public signing keys

	fetchMu     sync.Mutex // serialises fetches; a waiter then finds the fresh keys
	lastAttempt time.Time  // guarded by fetchMu

	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

func newJWKSCache(url string, client *http.Client, every, minEvery time.Duration, log zerolog.Logger) *jwksCache {
	c := &jwksCache{url: url, client: client, every: every, minEvery: minEvery, log: log, done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return c
}

func (c *jwksCache) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		<-c.done
	})
}

// run fetches at once, then every c.every; after a failure it retries sooner, backing
// off from minEvery up to every.
func (c *jwksCache) run() {
	defer close(c.done)
	backoff := c.minEvery
	for {
		next := c.every
		if err := c.refresh(false); err != nil {
			next = backoff
			backoff = min(2*backoff, c.every)
		} else {
			backoff = c.minEvery
		}
		t := time.NewTimer(next)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// candidates returns the cached keys that may verify a signature by alg with key id kid
// (any key id when kid is empty).
func (c *jwksCache) candidates(kid string, alg jose.SignatureAlgorithm) []jose.JSONWebKey {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []jose.JSONWebKey
	for i := range c.keys {
		k := &c.keys[i]
		if (kid == "" || k.KeyID == kid) && keyFits(k, alg) {
			out = append(out, *k)
		}
	}
	return out
}

// refresh refetches the JWKS unless another fetch started less than minEvery ago (a
// caller that waited on a fetch in progress then uses its result). onDemand says a
// token triggered it.
func (c *jwksCache) refresh(onDemand bool) error {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	if !c.lastAttempt.IsZero() && time.Since(c.lastAttempt) < c.minEvery {
		return nil
	}
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	c.lastAttempt = time.Now()
	keys, skipped, err := c.fetch()
	if err != nil {
		c.mu.RLock()
		n := len(c.keys)
		c.mu.RUnlock()
		c.log.Warn().Err(err).Str("jwks_url", c.url).Int("cached_keys", n).Bool("on_demand", onDemand).Msg("auth: JWKS fetch failed; keeping the cached keys")
		return err
	}
	c.mu.Lock()
	c.keys = keys
	c.mu.Unlock()
	c.log.Debug().Str("jwks_url", c.url).Int("keys", len(keys)).Int("skipped", skipped).Bool("on_demand", onDemand).Msg("auth: JWKS fetched")
	return nil
}

func (c *jwksCache) fetch() (keys []jose.JSONWebKey, skipped int, err error) {
	ctx, cancel := context.WithTimeout(c.ctx, DefaultJWKSTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("JWKS answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSSize+1))
	if err != nil {
		return nil, 0, err
	}
	if len(body) > maxJWKSSize {
		return nil, 0, fmt.Errorf("JWKS larger than %d bytes", maxJWKSSize)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, 0, fmt.Errorf("JWKS is not a JWK set: %v", err)
	}
	// Keys are taken one by one so that one we cannot use (an unknown kty, an
	// encryption key) does not discard the rest.
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			skipped++
			continue
		}
		if why := unusable(&k); why != "" {
			c.log.Debug().Str("kid", k.KeyID).Str("why", why).Msg("auth: JWKS key skipped")
			skipped++
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, skipped, errors.New("JWKS has no usable signing keys")
	}
	return keys, skipped, nil
}

// unusable says why k cannot verify token signatures, or "".
func unusable(k *jose.JSONWebKey) string {
	switch {
	case !k.Valid():
		return "invalid key"
	case !k.IsPublic():
		return "not a public key" // private or symmetric material has no place in a JWKS
	case k.Use != "" && k.Use != "sig":
		return "use is " + k.Use
	}
	if r, ok := k.Key.(*rsa.PublicKey); ok && r.N.BitLen() < minRSABits {
		return fmt.Sprintf("RSA key of %d bits", r.N.BitLen())
	}
	return ""
}
