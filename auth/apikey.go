package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// minTokenLen is the length below which a plaintext key draws a warning.
const minTokenLen = 16

type apiKeyEntry struct {
	hash [sha256.Size]byte
	// who is the key's principal, identified once: each request gets a copy (with
	// groups of its own), whose ID costs nothing.
	who principal.Principal
}

func buildAPIKeys(cfg []APIKey, log zerolog.Logger) ([]apiKeyEntry, error) {
	keys := make([]apiKeyEntry, 0, len(cfg))
	names := make(map[string]bool, len(cfg))
	hashes := make(map[[sha256.Size]byte]string, len(cfg))
	for i, k := range cfg {
		if k.Name == "" {
			return nil, fmt.Errorf("auth: API key #%d has no name", i+1)
		}
		if names[k.Name] {
			return nil, fmt.Errorf("auth: API key %q is configured twice", k.Name)
		}
		names[k.Name] = true
		e := apiKeyEntry{who: principal.Principal{Name: k.Name, Groups: slices.Clone(k.Groups), Via: principal.ViaAPIKey}}
		e.who.Identify()
		switch {
		case k.SHA256 != "" && k.Token != "":
			return nil, fmt.Errorf("auth: API key %q: set sha256 or token, not both", k.Name)
		case k.SHA256 != "":
			b, err := hex.DecodeString(k.SHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("auth: API key %q: sha256 must be %d hex digits (the output of `mcp-proxy hash-key`)", k.Name, 2*sha256.Size)
			}
			copy(e.hash[:], b)
		case k.Token != "":
			if len(k.Token) < minTokenLen {
				log.Warn().Str("api_key", k.Name).Msgf("auth: API key is shorter than %d characters; use a long random key", minTokenLen)
			}
			e.hash = sha256.Sum256([]byte(k.Token))
		default:
			return nil, fmt.Errorf("auth: API key %q: token or sha256 is required (an empty token is not allowed; is its environment variable set?)", k.Name)
		}
		if other, dup := hashes[e.hash]; dup {
			return nil, fmt.Errorf("auth: API keys %q and %q are the same key", other, k.Name)
		}
		hashes[e.hash] = k.Name
		keys = append(keys, e)
	}
	return keys, nil
}

// matchAPIKey returns the principal of the configured key tok is, or nil.
//
// The presented token is hashed once and compared with every configured hash using
// subtle.ConstantTimeCompare, without stopping at a match, and the matching index is
// picked with subtle.ConstantTimeSelect: the time taken depends only on the number of
// keys, not on which (if any) matched or on how much of a hash agreed. A map keyed by
// the hash would be as fast and safe for high-entropy keys, but a map lookup's timing
// can leak a prefix of a stored hash, and for a weak, human-chosen key that hash is what
// an attacker needs for an offline guess. n is small (a handful of keys), so the loop
// costs next to nothing beside the SHA-256 itself.
func (a *Authenticator) matchAPIKey(tok string) *principal.Principal {
	if len(a.keys) == 0 {
		return nil
	}
	h := sha256.Sum256([]byte(tok))
	idx := -1
	for i := range a.keys {
		eq := subtle.ConstantTimeCompare(h[:], a.keys[i].hash[:])
		idx = subtle.ConstantTimeSelect(eq, i, idx)
	}
	if idx < 0 {
		return nil
	}
	p := a.keys[idx].who
	p.Groups = slices.Clone(p.Groups)
	return &p
}
