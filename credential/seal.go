package credential

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/seal"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// MinKeyLen is the shortest key a Sealer takes: the size of the AES-256 key derived
// from it.
const MinKeyLen = 32

// Sealer encrypts what a store writes outside the process (AES-256-GCM, internal/seal):
// grants and flows, each bound by its additional data to where it belongs (a grant to
// its upstream and principal, a flow to its id), so that a sealed grant copied under
// another principal's name does not open. The AES key is derived from the configured
// key (an HMAC-SHA256 of a label, as the cluster's other keys are), never the key
// itself. A sealed value starts with one byte naming its key: values sealed with a
// previous key (rotation) still open; new ones are sealed with the first.
type Sealer struct {
	keys *seal.Keyring
}

// ErrNotSealed is returned for a value that is not sealed by this store's key: written
// with another key, or tampered with, or moved to another name.
var ErrNotSealed = errors.New("not a value sealed with the token store's key")

// sealLabel names the token store's use of its key (internal/seal.New).
const sealLabel = "mcp-proxy credentials: token store key"

// NewSealer makes the sealer of key (at least MinKeyLen bytes), opening values sealed
// with the previous keys too.
func NewSealer(key string, previous ...string) (*Sealer, error) {
	for _, k := range append([]string{key}, previous...) {
		if len(k) < MinKeyLen {
			return nil, fmt.Errorf("credential: the token store's key must be at least %d bytes", MinKeyLen)
		}
	}
	keys, err := seal.New(sealLabel, key, previous...)
	if err != nil {
		return nil, fmt.Errorf("credential: %w", err)
	}
	return &Sealer{keys: keys}, nil
}

func (s *Sealer) sealBytes(plain []byte, ad string) []byte { return s.keys.Seal(plain, []byte(ad)) }

func (s *Sealer) openBytes(b []byte, ad string) ([]byte, error) {
	plain, err := s.keys.Open(b, []byte(ad))
	if err != nil {
		return nil, ErrNotSealed
	}
	return plain, nil
}

// record is a grant as sealed: its secrets in plain (inside the seal only).
type record struct {
	Upstream     string            `json:"u"`
	Principal    string            `json:"p"`
	Mode         string            `json:"m"`
	AccessToken  string            `json:"at,omitempty"`
	RefreshToken string            `json:"rt,omitempty"`
	Expiry       time.Time         `json:"exp,omitzero"`
	Until        time.Time         `json:"un,omitzero"`
	Scopes       []string          `json:"sc,omitempty"`
	Issuer       string            `json:"iss,omitempty"`
	Subject      string            `json:"sub,omitempty"`
	Secrets      map[string]string `json:"s,omitempty"`
	Created      time.Time         `json:"c,omitzero"`
	Updated      time.Time         `json:"up,omitzero"`
	ClientID     string            `json:"ci,omitempty"`
	ClientSecret string            `json:"cs,omitempty"`
	ClientAuth   string            `json:"ca,omitempty"`
}

func recordOf(g *Grant) record {
	r := record{Upstream: g.Upstream, Principal: g.Principal, Mode: g.Mode, AccessToken: g.AccessToken.Reveal(),
		RefreshToken: g.RefreshToken.Reveal(), Expiry: g.Expiry, Until: g.Until, Scopes: g.Scopes, Issuer: g.Issuer, Subject: g.Subject,
		Created: g.Created, Updated: g.Updated, ClientID: g.ClientID, ClientSecret: g.ClientSecret.Reveal(), ClientAuth: g.ClientAuth}
	if len(g.Secrets) > 0 {
		r.Secrets = make(map[string]string, len(g.Secrets))
		for k, v := range g.Secrets {
			r.Secrets[k] = v.Reveal()
		}
	}
	return r
}

func (r *record) grant() *Grant {
	g := &Grant{Upstream: r.Upstream, Principal: r.Principal, Mode: r.Mode, AccessToken: principal.NewSecret(r.AccessToken),
		RefreshToken: principal.NewSecret(r.RefreshToken), Expiry: r.Expiry, Until: r.Until, Scopes: r.Scopes, Issuer: r.Issuer, Subject: r.Subject,
		Created: r.Created, Updated: r.Updated, ClientID: r.ClientID, ClientSecret: principal.NewSecret(r.ClientSecret), ClientAuth: r.ClientAuth}
	if len(r.Secrets) > 0 {
		g.Secrets = make(map[string]principal.Secret, len(r.Secrets))
		for k, v := range r.Secrets {
			g.Secrets[k] = principal.NewSecret(v)
		}
	}
	return g
}

func grantAD(upstream, principal string) string { return "grant\x00" + upstream + "\x00" + principal }

// SealGrant seals g, bound to its upstream and principal.
func (s *Sealer) SealGrant(g *Grant) ([]byte, error) {
	b, err := json.Marshal(recordOf(g))
	if err != nil {
		return nil, err
	}
	return s.sealBytes(b, grantAD(g.Upstream, g.Principal)), nil
}

// OpenGrant opens the grant of (upstream, principal) sealed in b.
func (s *Sealer) OpenGrant(b []byte, upstream, principal string) (*Grant, error) {
	plain, err := s.openBytes(b, grantAD(upstream, principal))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(plain, &r); err != nil || r.Upstream != upstream || r.Principal != principal {
		return nil, ErrNotSealed
	}
	return r.grant(), nil
}

// flowRecord is a flow as sealed.
type flowRecord struct {
	ID        string    `json:"id"`
	Upstream  string    `json:"u"`
	Principal string    `json:"p"`
	Verifier  string    `json:"v"`
	State     string    `json:"s"`
	Binding   string    `json:"b,omitempty"`
	Expires   time.Time `json:"exp"`
	ClientID  string    `json:"ci,omitempty"`
	ClientSec string    `json:"cs,omitempty"`
	ClientAu  string    `json:"ca,omitempty"`
}

// SealFlow seals f, bound to its id.
func (s *Sealer) SealFlow(f *Flow) ([]byte, error) {
	b, err := json.Marshal(flowRecord{ID: f.ID, Upstream: f.Upstream, Principal: f.Principal, Verifier: f.Verifier.Reveal(),
		State: f.State.Reveal(), Binding: f.Binding, Expires: f.Expires, ClientID: f.ClientID, ClientSec: f.ClientSecret.Reveal(), ClientAu: f.ClientAuth})
	if err != nil {
		return nil, err
	}
	return s.sealBytes(b, "flow\x00"+f.ID), nil
}

// OpenFlow opens the flow id sealed in b.
func (s *Sealer) OpenFlow(b []byte, id string) (*Flow, error) {
	plain, err := s.openBytes(b, "flow\x00"+id)
	if err != nil {
		return nil, err
	}
	var r flowRecord
	if err := json.Unmarshal(plain, &r); err != nil || r.ID != id {
		return nil, ErrNotSealed
	}
	return &Flow{ID: r.ID, Upstream: r.Upstream, Principal: r.Principal, Verifier: principal.NewSecret(r.Verifier),
		State: principal.NewSecret(r.State), Binding: r.Binding, Expires: r.Expires,
		ClientID: r.ClientID, ClientSecret: principal.NewSecret(r.ClientSec), ClientAuth: r.ClientAu}, nil
}
