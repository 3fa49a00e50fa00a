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
