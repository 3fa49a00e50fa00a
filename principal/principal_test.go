package principal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestSecretNeverShown: a principal's token does not come out of fmt, JSON, text or
// zerolog, however the principal or the token is printed.
func TestSecretNeverShown(t *testing.T) {
	const tok = "eyJ.very-secret-token.sig"
	p := &Principal{Name: "alice", Via: "jwt", Token: NewSecret(tok)}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		out = append(out, fmt.Sprintf(verb, p), fmt.Sprintf(verb, *p), fmt.Sprintf(verb, p.Token))
	}
	j, _ := json.Marshal(p)
	out = append(out, string(j))
	txt, _ := p.Token.MarshalText()
	out = append(out, string(txt))
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	log.Info().Interface("principal", p).Stringer("token", p.Token).Interface("tok", p.Token).Msg("x")
	out = append(out, buf.String())
	for _, o := range out {
		if strings.Contains(o, "very-secret") {
			t.Errorf("token shown: %s", o)
		}
	}
	if !strings.Contains(string(j), `"Token":"[redacted]"`) || p.Token.Reveal() != tok {
		t.Errorf("json %s, reveal %q", j, p.Token.Reveal())
	}
	if (Secret{}).String() != "" || !(Secret{}).IsZero() {
		t.Error("an empty secret shows something")
	}
}

// TestIdentity: a principal's identity says how it was established, so that an API key
// and a token of the same name, or the subjects of two issuers, never meet; ParseIdentity
// reads what ID writes, and tells a bare name from an identity; Identify makes ID free.
func TestIdentity(t *testing.T) {
	for _, tc := range []struct {
		p    Principal
		want string
	}{
		{Principal{Name: "alice", Via: ViaAPIKey}, "api_key:alice"},
		{Principal{Name: "alice", Via: ViaJWT, Issuer: "https://idp.example.com"}, "jwt:https://idp.example.com#alice"},
		{Principal{Name: "a#b:c", Via: ViaJWT, Issuer: "https://idp.example.com/t/1"}, "jwt:https://idp.example.com/t/1#a#b:c"},
		{Principal{Name: "me", Via: ViaStdio}, "stdio:me"},
		{*Anonymous, "anonymous:anonymous"},
		{Principal{Name: "alice"}, "alice"}, // made up (tests, tools --as): its name
	} {
		if got := tc.p.ID(); got != tc.want {
			t.Errorf("%+v: ID %q, want %q", tc.p, got, tc.want)
		}
		if tc.p.Via == "" {
			continue
		}
		via, iss, name, ok := ParseIdentity(tc.want)
		if !ok || via != tc.p.Via || iss != tc.p.Issuer || name != tc.p.Name {
			t.Errorf("ParseIdentity(%q) = %q %q %q %v", tc.want, via, iss, name, ok)
		}
	}
	for _, bare := range []string{"alice", "svc-catalogue", "user:alice", "api_key:", ""} {
		if _, _, _, ok := ParseIdentity(bare); ok {
			t.Errorf("%q read as an identity", bare)
		}
	}
	if via, iss, name, ok := ParseIdentity("jwt:alice"); !ok || via != ViaJWT || iss != "" || name != "alice" {
		t.Errorf("jwt:alice: %q %q %q %v", via, iss, name, ok)
	}
	p := (&Principal{Name: "alice", Via: ViaJWT, Issuer: "https://idp.example.com"}).Identify()
	if n := testing.AllocsPerRun(100, func() { _ = p.ID() }); n != 0 {
		t.Errorf("ID of an identified principal allocates %v times", n)
	}
}

// FuzzParseIdentity: whatever it reads, ParseIdentity never panics, and what it reads as
// an identity is written back as the same string by Identity; every identity a
// configuration can make (a known way, a URL issuer without '#' for a token, any name)
// reads back as itself.
func FuzzParseIdentity(f *testing.F) {
	for _, s := range []string{"api_key:alice", "jwt:https://idp.example.com#alice", "jwt:alice", "stdio:me", "anonymous:anonymous",
		"alice", "jwt:https://x#a#b", "jwt:", ":", "user:x", "jwt:x#y"} {
		f.Add(s, "https://idp.example.com", "alice")
	}
	f.Fuzz(func(t *testing.T, s, issuer, name string) {
		if via, iss, n, ok := ParseIdentity(s); ok && Identity(via, iss, n) != s {
			t.Errorf("ParseIdentity(%q) = %q %q %q, which Identity writes %q", s, via, iss, n, Identity(via, iss, n))
		}
		if name == "" || !strings.Contains(issuer, ":") || strings.Contains(issuer, "#") {
			return
		}
		for _, p := range []Principal{{Name: name, Via: ViaAPIKey}, {Name: name, Via: ViaStdio}, {Name: name, Via: ViaJWT, Issuer: issuer}} {
			via, iss, n, ok := ParseIdentity(p.ID())
			if !ok || via != p.Via || iss != p.Issuer || n != p.Name {
				t.Errorf("%+v: ID %q reads back as %q %q %q %v", p, p.ID(), via, iss, n, ok)
			}
		}
	})
}
