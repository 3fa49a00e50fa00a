package cluster

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/seal"
)

// maxSealed bounds the description a session id carries (bytes before sealing): a
// client whose initialize says more than this gets a session no replica can adopt.
const maxSealed = 1024

// Sealer seals a legacy session's description into its id with AES-256-GCM
// (internal/seal), so that any replica holding the cluster's key can read it back when
// the session's owner is gone, and nobody else can read it or forge one.
//
// An id is OWNER "-" base64url(kid ‖ nonce ‖ ciphertext ‖ tag): the owner's replica id
// (the forwarder routes by it) is the AEAD's additional data, so it cannot be changed
// without the id being refused. kid is one byte derived from the key, which names the key
// an id was sealed with: replicas given the new key and the previous ones (rotation) read
// ids sealed with any of them and seal with the first.
type Sealer struct {
	keys *seal.Keyring
}

// ErrNotSealed is returned by Open for an id that is not a sealed one of this cluster:
// forged, tampered with, sealed with an unknown key, or minted without a key.
var ErrNotSealed = errors.New("not a sealed session id of this cluster")

// sealLabel names the sessions' use of the cluster's key (internal/seal.New).
const sealLabel = "mcp-proxy cluster: session key"

// NewSealer makes the sealer of the cluster's shared key (config.Cluster.Key), reading
// ids sealed with previous keys too. The AES key is derived from the shared key (an
// HMAC-SHA256 of a label, as the cursor key is), never the key itself.
func NewSealer(key string, previous ...string) (*Sealer, error) {
	if key == "" {
		return nil, errors.New("cluster: sealing sessions needs the cluster's key")
	}
	keys, err := seal.New(sealLabel, key, previous...)
	if err != nil {
		return nil, fmt.Errorf("cluster: session key: %w", err)
	}
	return &Sealer{keys: keys}, nil
}

// Seal returns the id of a session opened by replica owner, carrying desc; an error when
// desc is longer than 1 KiB.
func (s *Sealer) Seal(owner string, desc []byte) (string, error) {
	if len(desc) > maxSealed {
		return "", fmt.Errorf("cluster: a session description of %d bytes is more than %d", len(desc), maxSealed)
	}
	return owner + "-" + base64.RawURLEncoding.EncodeToString(s.keys.Seal(desc, []byte(owner))), nil
}

// Open returns the owner and the description sealed into id, or ErrNotSealed.
func (s *Sealer) Open(id string) (owner string, desc []byte, err error) {
	owner, sealed, ok := strings.Cut(id, "-")
	if !ok || owner == "" || len(sealed) > base64.RawURLEncoding.EncodedLen(seal.Overhead+maxSealed) {
		return "", nil, ErrNotSealed
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sealed) // Strict: one spelling per id
	if err != nil {
		return "", nil, ErrNotSealed
	}
	desc, err = s.keys.Open(raw, []byte(owner))
	if err != nil {
		return "", nil, ErrNotSealed
	}
	return owner, desc, nil
}
