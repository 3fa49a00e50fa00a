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
