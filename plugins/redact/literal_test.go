package redact

import "testing"

// TestAnchors checks that every anchor of the built-ins finds each of its prefixes,
// alone and inside text.
func TestAnchors(t *testing.T) {
	all := []*anchor{jwtStart, pemStart}
	all = append(all, bearerAnchors...)
	for _, p := range []*prefixed{awsAccessKey, githubClassic, githubFine, gitlab, slack, stripe, anthropic, openAI, googleAPI, npmToken} {
		all = append(all, p.anchors...)
	}
	for _, a := range all {
		if a.off < 0 {
			t.Errorf("anchor %q: the prefixes share no byte", a.prefixes)
			continue
		}
		for _, p := range a.prefixes {
			for _, text := range []string{p, "a " + p + " b", p[:len(p)-1] + "#" + p} {
				want := len(text) - len(p)
				if text != p && text[:2] == "a " {
					want = 2
				}
				if got, prefix := a.next([]byte(text), 0); got != want || prefix != p {
					t.Errorf("anchor %q: next(%q) = %d, %q; want %d, %q", a.prefixes, text, got, prefix, want, p)
				}
			}
		}
	}
}

func TestAnchorNext(t *testing.T) {
	a := newAnchor("xoxb-", "xoxp-")
	s := []byte("xox xoxa- xoxb-1 xoxp-2")
	var got []int
	for from := 0; ; {
		i, _ := a.next(s, from)
		if i < 0 {
			break
		}
		got = append(got, i)
		from = i + 1
	}
	if len(got) != 2 || got[0] != 10 || got[1] != 17 {
		t.Errorf("matches at %v, want [10 17]", got)
	}
	if i, _ := newAnchor("ab", "cd").next([]byte("ab cd"), 0); i != -1 {
		t.Errorf("an anchor without a shared byte found %d", i)
	}
}

func TestNewAnchor(t *testing.T) {
	tests := []struct {
		prefixes  []string
		off, off2 int
		b, b2     byte
	}{
		{[]string{"xoxb-", "xoxp-", "xoxe.xoxp-"}, 0, 1, 'x', 'o'},
		{[]string{"ghp_", "gho_"}, 3, 0, '_', 'g'},
		{[]string{"sk_live_", "rk_test_"}, 1, 2, 'k', '_'},
		{[]string{"eyJ"}, 2, 1, 'J', 'y'},
		{[]string{"Bearer", "BEARER"}, 0, -1, 'B', 0},
		{[]string{"ab", "cd"}, -1, -1, 0, 0},
	}
	for _, tc := range tests {
		a := newAnchor(tc.prefixes...)
		if a.off != tc.off || a.off2 != tc.off2 || (a.off >= 0 && a.b != tc.b) || (a.off2 >= 0 && a.b2 != tc.b2) {
			t.Errorf("newAnchor(%q) = off %d %q, off2 %d %q; want %d %q, %d %q",
				tc.prefixes, a.off, a.b, a.off2, a.b2, tc.off, tc.b, tc.off2, tc.b2)
		}
	}
}
