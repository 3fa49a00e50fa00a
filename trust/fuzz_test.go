package trust

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzCanonical: for any input, canonical never panics; what it accepts is valid JSON,
// canonical again gives the same bytes, and encoding/json reads the same value from both.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","description":"d","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`,
		`{"name":"a","inputSchema":{"b":[1,2,{"c":null}],"a":true}}`,
		`{"name":"\u00e9\ud83d\ude00","description":"tab\there \"q\" <x>"}`,
		`{"name":"x","inputSchema":{"a":1,"a":2}}`,
		`{"name":"x","annotations":{"readOnlyHint":true},"title":"T","outputSchema":{}}`,
		`[1]`, `{}`, `{"name":1e5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		canon, _, err := canonical(KindTool, raw)
		if err != nil {
			return
		}
		if !json.Valid(canon) {
			t.Fatalf("canonical form is not JSON: %q from %q", canon, raw)
		}
		again, _, err := canonical(KindTool, canon)
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("not idempotent: %q → %q (%v)", canon, again, err)
		}
		var a, b any
		if json.Unmarshal(canon, &b) != nil {
			t.Fatalf("canonical form unreadable: %q", canon)
		}
		if json.Unmarshal(raw, &a) == nil {
			// Only the pinned members are kept; compare those.
			if m, ok := a.(map[string]any); ok {
				for k := range m {
					if !pinnedKey(k) {
						delete(m, k)
					}
				}
			}
			if ea, eb := encode(a), encode(b); ea != eb {
				t.Fatalf("value changed: %s vs %s", ea, eb)
			}
		}
	})
}

func pinnedKey(k string) bool {
	for _, p := range pinned[KindTool] {
		if p == k {
			return true
		}
	}
	return false
}

// FuzzParseLock: a lock file's content never panics the reader.
func FuzzParseLock(f *testing.F) {
	l := NewLock()
	canon, _, _ := canonical(KindTool, []byte(`{"name":"a","description":"d"}`))
	l.Upstreams["u"] = &LockUpstream{Server: Server{Name: "s", Version: "1"}, Tools: map[string]Entry{"a": {SHA256: hashOf(canon), Definition: canon}}}
	b, _ := l.Encode()
	f.Add(b)
	f.Add([]byte(`{"lock_version":1,"upstreams":{"u":null}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if l, err := ParseLock(b, "x"); err == nil {
			if _, err := l.Encode(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
