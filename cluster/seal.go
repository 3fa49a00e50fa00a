package cluster

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// maxSealed bounds the description a session id carries (bytes before sealing): a
// client whose initialize says more than this gets a session no replica can adopt.
const maxSealed = 1024

// Sealer seals a legacy session's description into its id with AES-256-GCM, so that any
// replica holding the cluster's key can read it back when the session's owner is gone,
// and nobody else can read it or forge one.
//
// An id is OWNER "-" base64url(kid ‖ nonce ‖ ciphertext ‖ tag): the owner's replica id
// (the forwarder routes by it) is the AEAD's additional data, so it cannot be changed
// without the id being refused. kid is one byte derived from the key, which names the key
// an id was sealed with: replicas given the new key and the previous ones (rotation) read
// ids sealed with any of them and seal with the first.
type Sealer struct {
	seal  cipher.AEAD
	kid   byte
	opens map[byte]cipher.AEAD
}

// ErrNotSealed is returned by Open for an id that is not a sealed one of this cluster:
// forged, tampered with, sealed with an unknown key, or minted without a key.
var ErrNotSealed = errors.New("not a sealed session id of this cluster")

// NewSealer makes the sealer of the cluster's shared key (config.Cluster.Key), reading
// ids sealed with previous keys too. The AES key is derived from the shared key (an
// HMAC-SHA256 of a label, as the cursor key is), never the key itself.
func NewSealer(key string, previous ...string) (*Sealer, error) {
	if key == "" {
		return nil, errors.New("cluster: sealing sessions needs the cluster's key")
	}
	s := &Sealer{opens: map[byte]cipher.AEAD{}}
	for i, k := range append([]string{key}, previous...) {
		aead, kid, err := sessionAEAD(k)
		if err != nil {
			return nil, err
		}
		if _, dup := s.opens[kid]; dup {
			continue // the same key twice, or two keys whose ids collide: the first wins
		}
		s.opens[kid] = aead
		if i == 0 {
			s.seal, s.kid = aead, kid
		}
	}
	return s, nil
}

func sessionAEAD(key string) (cipher.AEAD, byte, error) {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("mcp-proxy cluster: session key"))
	k := m.Sum(nil)
	m = hmac.New(sha256.New, []byte(key))
	m.Write([]byte("mcp-proxy cluster: session key id"))
	kid := m.Sum(nil)[0]
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: session key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: session key: %w", err)
	}
	return aead, kid, nil
}

// Seal returns the id of a session opened by replica owner, carrying desc; an error when
// desc is longer than 1 KiB.
func (s *Sealer) Seal(owner string, desc []byte) (string, error) {
	if len(desc) > maxSealed {
		return "", fmt.Errorf("cluster: a session description of %d bytes is more than %d", len(desc), maxSealed)
	}
	ns := s.seal.NonceSize()
	buf := make([]byte, 1+ns, 1+ns+len(desc)+s.seal.Overhead())
	buf[0] = s.kid
	_, _ = rand.Read(buf[1:]) // never fails since Go 1.24
	buf = s.seal.Seal(buf, buf[1:1+ns], desc, []byte(owner))
	return owner + "-" + base64.RawURLEncoding.EncodeToString(buf), nil
}

// Open returns the owner and the description sealed into id, or ErrNotSealed.
func (s *Sealer) Open(id string) (owner string, desc []byte, err error) {
	owner, sealed, ok := strings.Cut(id, "-")
	if !ok || owner == "" || len(sealed) > base64.RawURLEncoding.EncodedLen(1+12+maxSealed+16) {
		return "", nil, ErrNotSealed
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sealed) // Strict: one spelling per id
	if err != nil || len(raw) < 1 {
		return "", nil, ErrNotSealed
	}
	aead := s.opens[raw[0]]
	if aead == nil || len(raw) < 1+aead.NonceSize()+aead.Overhead() {
		return "", nil, ErrNotSealed
	}
	ns := aead.NonceSize()
	desc, err = aead.Open(nil, raw[1:1+ns], raw[1+ns:], []byte(owner))
	if err != nil {
		return "", nil, ErrNotSealed
	}
	return owner, desc, nil
}
