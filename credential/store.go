package credential

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// Grant is one principal's credential for one upstream, as the store keeps it: the
// token an exchange or an authorization gave (with its refresh token), or the
// principal's secrets. Its secret parts are principal.Secret, so that a Grant printed,
// logged or encoded by mistake shows none of them; a store seals them with Seal.
type Grant struct {
	Upstream  string
	Principal string
	Mode      string // the credential mode that made it ("exchange", "oauth", "secret")

	AccessToken  principal.Secret
	RefreshToken principal.Secret
	Expiry       time.Time // of the access token; zero: unknown
	// Until, for an exchanged token (and an ID-JAG's), is when the principal's own token
	// that was exchanged expires: the grant is not served past it, however long the
	// upstream's token lives, so that a person whose session ended at the identity
	// provider is not served by a cached exchange. Zero: no such limit.
	Until  time.Time
	Scopes []string
	Issuer string // the authorization server that issued it
	// Subject is whom the upstream knows the grant as, when the proxy can tell (the
	// sub of a JWT access token): shown by `credentials list` and in audit records.
	Subject string
	// Secrets are a principal's named secrets (mode "secret", when the store holds
	// them).
	Secrets map[string]principal.Secret
	// ClientID, ClientSecret and ClientAuth are the proxy's client the grant was issued
	// to (mode "oauth"): a refresh must present the same client, whichever replica
	// refreshes (each may have registered a client of its own).
	ClientID     string
	ClientSecret principal.Secret
	ClientAuth   string

	Created, Updated time.Time
}

// Ends is when g stops being served: its token's expiry, or Until when that is earlier;
// zero when neither is known.
func (g *Grant) Ends() time.Time {
	if !g.Until.IsZero() && (g.Expiry.IsZero() || g.Until.Before(g.Expiry)) {
		return g.Until
	}
	return g.Expiry
}

// Info is what may be shown of a grant: everything but its secret parts.
type Info struct {
	Upstream   string    `json:"upstream"`
	Principal  string    `json:"principal"`
	Mode       string    `json:"mode"`
	Subject    string    `json:"subject,omitempty"`
	Scopes     []string  `json:"scopes,omitempty"`
	Issuer     string    `json:"issuer,omitempty"`
	Expiry     time.Time `json:"expiry,omitzero"` // until when it is served: its token's expiry, or Until when earlier
	Refresh    bool      `json:"refresh"`         // it has a refresh token
	SecretKeys []string  `json:"secrets,omitempty"`
	Created    time.Time `json:"created,omitzero"`
	Updated    time.Time `json:"updated,omitzero"`
}

// Info returns what may be shown of g.
func (g *Grant) Info() Info {
	in := Info{Upstream: g.Upstream, Principal: g.Principal, Mode: g.Mode, Subject: g.Subject, Scopes: slices.Clone(g.Scopes),
		Issuer: g.Issuer, Expiry: g.Ends(), Refresh: !g.RefreshToken.IsZero(), Created: g.Created, Updated: g.Updated}
	for k := range g.Secrets {
		in.SecretKeys = append(in.SecretKeys, k)
	}
	slices.Sort(in.SecretKeys)
	return in
}

// Store keeps the grants of every (upstream, principal): in memory (MemoryStore), in an
// encrypted file for one node (FileStore), or encrypted in Redis for a cluster (package
// cluster), so that every replica serves a principal's grant. The proxy reads it on a
// cache miss, not per call. A store that fails returns the error: the call it was for
// fails with a proxy error (never with another credential).
type Store interface {
	// Get returns the grant of (upstream, principal), or nil and no error when there is
	// none.
	Get(ctx context.Context, upstream, principal string) (*Grant, error)
	// Put stores g, replacing the grant of its (upstream, principal).
	Put(ctx context.Context, g *Grant) error
	// Delete removes the grant of (upstream, principal); none is not an error.
	Delete(ctx context.Context, upstream, principal string) error
	// List returns what may be shown of the grants of upstream ("" for every upstream),
	// and of principal ("" for every principal).
	List(ctx context.Context, upstream, principal string) ([]Info, error)
	// Lease takes, for at most ttl, the right to renew the grant of (upstream,
	// principal), so that a refresh happens once however many replicas want it. ok is
	// false when another holder has it; release gives it back early.
	Lease(ctx context.Context, upstream, principal string, ttl time.Duration) (release func(), ok bool, err error)
	// PutFlow keeps a per-user authorization in progress until f.Expires, replacing the
	// one of the same ID.
	PutFlow(ctx context.Context, f *Flow) error
	// GetFlow returns the flow id, or nil and no error when there is none (or it
	// expired).
	GetFlow(ctx context.Context, id string) (*Flow, error)
	// TakeFlow returns the flow id and removes it, in one step: a flow completes once.
	TakeFlow(ctx context.Context, id string) (*Flow, error)
	// Close releases what the store holds (connections, files).
	Close() error
}

// MemoryStore is a Store in this process's memory: grants end with it.
type MemoryStore struct {
	mu     sync.Mutex // guards grants, leases and flows
	grants map[grantKey]*Grant
	leases map[grantKey]time.Time
	flows  map[string]*Flow
}

type grantKey struct{ upstream, principal string }

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{grants: map[grantKey]*Grant{}, leases: map[grantKey]time.Time{}, flows: map[string]*Flow{}}
}

var _ Store = (*MemoryStore)(nil)

// Get implements Store.
func (m *MemoryStore) Get(_ context.Context, up, p string) (*Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.grants[grantKey{up, p}]
	if g == nil {
		return nil, nil
	}
	c := *g
	return &c, nil
}

// Put implements Store.
func (m *MemoryStore) Put(_ context.Context, g *Grant) error {
	c := *g
	m.mu.Lock()
	m.grants[grantKey{g.Upstream, g.Principal}] = &c
	m.mu.Unlock()
	return nil
}

// Delete implements Store.
func (m *MemoryStore) Delete(_ context.Context, up, p string) error {
	m.mu.Lock()
	delete(m.grants, grantKey{up, p})
	m.mu.Unlock()
	return nil
}

// List implements Store.
func (m *MemoryStore) List(_ context.Context, up, p string) ([]Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Info
	for k, g := range m.grants {
		if (up == "" || k.upstream == up) && (p == "" || k.principal == p) {
			out = append(out, g.Info())
		}
	}
	SortInfos(out)
	return out, nil
}

// Lease implements Store.
func (m *MemoryStore) Lease(_ context.Context, up, p string, ttl time.Duration) (func(), bool, error) {
	k := grantKey{up, p}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if until, held := m.leases[k]; held && now.Before(until) {
		return nil, false, nil
	}
	if len(m.leases) >= 1024 { // forget the expired ones (a link's lease is never released)
		for lk, until := range m.leases {
			if !now.Before(until) {
				delete(m.leases, lk)
			}
		}
	}
	until := now.Add(ttl)
	m.leases[k] = until
	return func() {
		m.mu.Lock()
		if m.leases[k] == until {
			delete(m.leases, k)
		}
		m.mu.Unlock()
	}, true, nil
}

// PutFlow implements Store.
func (m *MemoryStore) PutFlow(_ context.Context, f *Flow) error {
	c := *f
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for id, old := range m.flows { // forget the expired ones
		if !now.Before(old.Expires) {
			delete(m.flows, id)
		}
	}
	m.flows[f.ID] = &c
	return nil
}

// GetFlow implements Store.
func (m *MemoryStore) GetFlow(_ context.Context, id string) (*Flow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.flows[id]
	if f == nil || !time.Now().Before(f.Expires) {
		return nil, nil
	}
	c := *f
	return &c, nil
}

// TakeFlow implements Store.
func (m *MemoryStore) TakeFlow(_ context.Context, id string) (*Flow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.flows[id]
	delete(m.flows, id)
	if f == nil || !time.Now().Before(f.Expires) {
		return nil, nil
	}
	return f, nil
}

// Close implements Store.
func (m *MemoryStore) Close() error { return nil }

// SortInfos orders grants by upstream, then principal.
func SortInfos(l []Info) {
	slices.SortFunc(l, func(a, b Info) int {
		if a.Upstream != b.Upstream {
			if a.Upstream < b.Upstream {
				return -1
			}
			return 1
		}
		switch {
		case a.Principal < b.Principal:
			return -1
		case a.Principal > b.Principal:
			return 1
		}
		return 0
	})
}
