// Package seal is the proxy's one way of sealing what it keeps outside the process
// (a legacy session's description in its id, the token store's grants and flows):
// AES-256-GCM under a key derived from a configured secret, with a one-byte key id in
// front so that keys rotate. It knows nothing of what it seals, of where the sealed
// bytes go, nor of their encoding; it never uses the configured secret itself as a key,
// and never logs.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// Sizes of a sealed value: one byte naming the key, the nonce, the ciphertext (as long
// as the plaintext) and the tag. Overhead is what sealing adds.
const (
	NonceSize = 12
	TagSize   = 16
	Overhead  = 1 + NonceSize + TagSize
)

// ErrNotSealed is returned by Open for bytes this keyring did not seal with that
// additional data: sealed with another key, tampered with, bound to other data, or not
// sealed at all. Callers wrap or replace it with what they were opening.
var ErrNotSealed = errors.New("seal: not sealed with this keyring")

// Keyring seals with its first key and opens what any of its keys sealed. Each key's
// AEAD key is HMAC-SHA256(secret, label) and its id the first byte of
// HMAC-SHA256(secret, label + " id"): the label keeps two uses of one secret (the
// cluster's key seals session ids and, by default, the token store) from opening each
// other's values. Two secrets whose ids collide (1 in 256) cannot be told apart: the
// first given wins. A Keyring is immutable and safe for concurrent use.
type Keyring struct {
	seal  cipher.AEAD
	kid   byte
	opens [256]cipher.AEAD // by key id
}

// New makes the keyring of key, which seals, and of the previous keys (rotation), which
// only open; label names the use (such as "mcp-proxy cluster: session key"). A key must
// not be empty; how long it must be is the caller's rule.
func New(label, key string, previous ...string) (*Keyring, error) {
	k := &Keyring{}
	for i, secret := range append([]string{key}, previous...) {
		if secret == "" {
			return nil, errors.New("seal: a key must not be empty")
		}
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(label))
		block, err := aes.NewCipher(m.Sum(nil))
		if err != nil {
			return nil, fmt.Errorf("seal: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("seal: %w", err)
		}
		m = hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(label + " id"))
		kid := m.Sum(nil)[0]
		if k.opens[kid] != nil {
			continue // the same key twice, or two keys whose ids collide: the first wins
		}
		k.opens[kid] = aead
		if i == 0 {
			k.seal, k.kid = aead, kid
		}
	}
	return k, nil
}

// Seal returns plaintext sealed with the first key and bound to ad (which is not in the
// result: Open needs the same): kid ‖ nonce ‖ ciphertext ‖ tag, with a random nonce.
func (k *Keyring) Seal(plaintext, ad []byte) []byte {
	out := make([]byte, 1+NonceSize, len(plaintext)+Overhead)
	out[0] = k.kid
	_, _ = rand.Read(out[1:]) // never fails since Go 1.24
	return k.seal.Seal(out, out[1:], plaintext, ad)
}

// Open returns the plaintext of sealed, which must have been sealed by one of the
// keyring's keys with the same ad; otherwise ErrNotSealed. It never panics, whatever
// sealed holds.
func (k *Keyring) Open(sealed, ad []byte) ([]byte, error) {
	if len(sealed) < Overhead {
		return nil, ErrNotSealed
	}
	aead := k.opens[sealed[0]]
	if aead == nil {
		return nil, ErrNotSealed
	}
	plain, err := aead.Open(nil, sealed[1:1+NonceSize], sealed[1+NonceSize:], ad)
	if err != nil {
		return nil, ErrNotSealed
	}
	return plain, nil
}
