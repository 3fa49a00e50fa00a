package config

import (
	"github.com/hashicorp/hcl/v2"
)

// TokenStore is the token_store block: where the principals' per-user credentials
// (docs/credentials.md) are kept. Without it they are in memory, or, with a cluster
// block, in Redis sealed with the cluster's key.
type TokenStore struct {
	// File keeps them on this node across restarts, encrypted (AES-256-GCM) with Key;
	// absolute. "": in memory (or Redis, with a cluster block, which excludes a file).
	File string
	// Key encrypts them (at least 32 bytes; write it with env()); with a cluster block
	// it defaults to the cluster's key.
	Key string
	// PreviousKeys still open what older keys sealed (rotation).
	PreviousKeys []string
	DeclRange    hcl.Range
}

type rawTokenStore struct {
	File         *hcl.Attribute `hcl:"file,optional"`
	Key          *hcl.Attribute `hcl:"key,optional"`
	PreviousKeys *hcl.Attribute `hcl:"previous_keys,optional"`

	DefRange hcl.Range `hcl:",def_range"`
}

func decodeTokenStore(e *evaluator, raws []rawTokenStore, baseDir string) *TokenStore {
	return single(e, raws, "token_store", func(r *rawTokenStore) hcl.Range { return r.DefRange },
		func(raw *rawTokenStore) *TokenStore {
			t := &TokenStore{DeclRange: raw.DefRange}
			if s, ok := e.string(raw.File); ok {
				if s == "" {
					e.errorf(raw.File, "Invalid file", "\"file\" must be a file path; leave it out to keep the credentials in memory.")
				} else {
					t.File = resolvePath(baseDir, s)
				}
			}
			if s, ok := e.string(raw.Key); ok {
				if len(s) < minClusterKeyLen {
					e.errorf(raw.Key, "Invalid key",
						"\"key\" must be a secret of at least %d bytes, such as the output of openssl rand -hex 32, written with env(); it has %d.",
						minClusterKeyLen, len(s))
				} else {
					t.Key = s
				}
			}
			if keys, ok := e.stringList(raw.PreviousKeys); ok {
				for _, k := range keys {
					if len(k) < minClusterKeyLen {
						e.errorf(raw.PreviousKeys, "Invalid previous_keys", "each of \"previous_keys\" must be at least %d bytes, as \"key\" is.", minClusterKeyLen)
						continue
					}
					t.PreviousKeys = append(t.PreviousKeys, k)
				}
			}
			if t.File != "" && raw.Key == nil {
				e.blockErrorf(raw.DefRange, "Missing key", "A token_store with a \"file\" needs the \"key\" that encrypts it: key = env(\"MCP_PROXY_TOKEN_KEY\") (at least 32 bytes).")
			}
			return t
		})
}

// StoreKey is the key the token store seals with, and the previous ones: the
// token_store block's, else (with a cluster block) the cluster's; "" for none.
func (c *Config) StoreKey() (string, []string) {
	if t := c.TokenStore; t != nil && t.Key != "" {
		return t.Key, t.PreviousKeys
	}
	if c.Cluster != nil {
		return c.Cluster.Key, c.Cluster.PreviousKeys
	}
	return "", nil
}

// checkTokenStore checks the token store against the rest of the file: a cluster's
// grants are in Redis (no file), sealed with a key every replica has.
func checkTokenStore(e *evaluator, cfg *Config) {
	t := cfg.TokenStore
	if t != nil && t.File != "" && cfg.Cluster != nil {
		e.blockErrorf(t.DeclRange, "Token file in a cluster",
			"With a cluster block the replicas share the credentials in Redis: drop \"file\" (the token_store may keep its key).")
	}
	if cfg.Cluster == nil {
		return
	}
	if key, _ := cfg.StoreKey(); key != "" {
		return
	}
	for _, u := range cfg.Upstreams {
		if u.Credentials.PerUser() && !u.Disabled {
			e.blockErrorf(u.Credentials.ModeRange, "Per-user credentials without a shared key",
				"Upstream %q keeps each principal's credentials in Redis, sealed with a key every replica must share: set key in the cluster block "+
					"(or in a token_store block), at least 32 bytes, with env().", u.Name)
			return
		}
	}
}
