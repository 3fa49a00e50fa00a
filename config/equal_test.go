package config

import "testing"

func TestEqualIgnoresPositionsNotMeaning(t *testing.T) {
	const a = `
upstream "x" {
  command = ["x", "--flag"]
}
policy {
  default = "allow"
  rule "r" {
    effect    = "deny"
    tools     = ["x__*"]
    condition = args.path == "/etc"
  }
}
plugin "p" {
  command = ["p"]
  config {
    level = 1
  }
}
`
	// The same blocks, moved down and reformatted in places that do not matter.
	const b = `
# a comment moves everything down


upstream "x" {
  command = ["x",   "--flag"]
}

policy {
  default = "allow"
  rule "r" {
    effect    = "deny"
    tools     = ["x__*"]
    condition = args.path == "/etc"
  }
}

plugin "p" {
  command = ["p"]
  config {
    level = 1
  }
}
`
	ca, diags := Parse([]byte(a), "a.hcl", t.TempDir())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cb, diags := Parse([]byte(b), "b.hcl", t.TempDir())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cb.Upstreams[0].Cwd = ca.Upstreams[0].Cwd // both temporary directories: not the point here
	cb.Plugins[0].Dir = ca.Plugins[0].Dir
	if !Equal(ca.Upstreams[0], cb.Upstreams[0], ca, cb) {
		t.Error("the same upstream moved down compares different")
	}
	if !Equal(ca.Policy, cb.Policy, ca, cb) {
		t.Error("the same policy moved down compares different")
	}
	if !Equal(ca.Plugins[0], cb.Plugins[0], ca, cb) {
		t.Error("the same plugin moved down compares different")
	}

	c := []byte(b)
	for _, edit := range []struct{ from, to, what string }{
		{`"--flag"`, `"--other"`, "upstream"},
		{`args.path == "/etc"`, `args.path == "/usr"`, "policy"},
		{`level = 1`, `level = 2`, "plugin"},
	} {
		src := []byte(string(c))
		src = []byte(replaceOnce(string(src), edit.from, edit.to))
		cc, diags := Parse(src, "c.hcl", t.TempDir())
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		cc.Upstreams[0].Cwd, cc.Plugins[0].Dir = ca.Upstreams[0].Cwd, ca.Plugins[0].Dir
		var same bool
		switch edit.what {
		case "upstream":
			same = Equal(ca.Upstreams[0], cc.Upstreams[0], ca, cc)
		case "policy":
			same = Equal(ca.Policy, cc.Policy, ca, cc)
		case "plugin":
			same = Equal(ca.Plugins[0], cc.Plugins[0], ca, cc)
		}
		if same {
			t.Errorf("%s: %s → %s compares equal", edit.what, edit.from, edit.to)
		}
	}
}

func replaceOnce(s, from, to string) string {
	for i := 0; i+len(from) <= len(s); i++ {
		if s[i:i+len(from)] == from {
			return s[:i] + to + s[i+len(from):]
		}
	}
	return s
}
