package config

import (
	"reflect"
	"strings"
	"testing"
)

func strp(s string) *string { return &s }

func TestParseFilters(t *testing.T) {
	src := `upstream "github" {
  command = ["gh"]
  tools {
    include = ["create_*", "get_*"]
    exclude = ["*_admin"]
  }
  tool "create_issue" {
    name        = "new_issue"
    title       = "Create an issue"
    description = "Opens an issue in the <tracker> & more."
  }
  tool "get_me" {
    description = ""
  }
  prompts {
    exclude = ["secret_*"]
  }
  prompt "summarize" {
    name = "summary"
  }
}

upstream "plain" {
  command = ["p"]
}
`
	cfg := mustParse(t, src, fakeEnv(nil))
	gh := cfg.Upstreams[0]
	if !reflect.DeepEqual(gh.Tools.Include, []string{"create_*", "get_*"}) || !reflect.DeepEqual(gh.Tools.Exclude, []string{"*_admin"}) {
		t.Errorf("tools include/exclude = %q / %q", gh.Tools.Include, gh.Tools.Exclude)
	}
	if len(gh.Tools.Overrides) != 2 {
		t.Fatalf("tool overrides: %+v", gh.Tools.Overrides)
	}
	o := gh.Tools.Overrides[0]
	if o.Original != "create_issue" || o.Name != "new_issue" || *o.Title != "Create an issue" ||
		*o.Description != "Opens an issue in the <tracker> & more." || o.Exposed() != "new_issue" {
		t.Errorf("create_issue override: %+v", o)
	}
	if o.NameRange.Start.Line != 8 || o.DeclRange.Start.Line != 7 {
		t.Errorf("ranges: name at line %d, block at line %d", o.NameRange.Start.Line, o.DeclRange.Start.Line)
	}
	o = gh.Tools.Overrides[1]
	if o.Original != "get_me" || o.Name != "" || o.Title != nil || o.Description == nil || *o.Description != "" || o.Exposed() != "get_me" {
		t.Errorf("get_me override: %+v", o)
	}
	if gh.Prompts.Include != nil || !reflect.DeepEqual(gh.Prompts.Exclude, []string{"secret_*"}) ||
		len(gh.Prompts.Overrides) != 1 || gh.Prompts.Overrides[0].Exposed() != "summary" {
		t.Errorf("prompts: %+v", gh.Prompts)
	}
	for name, want := range map[string]bool{"create_issue": true, "get_me": true, "get_admin": false, "delete_repo": false} {
		if got := gh.Tools.Selects(name); got != want {
			t.Errorf("Selects(%q) = %v, want %v", name, got, want)
		}
	}
	plain := cfg.Upstreams[1]
	if !reflect.DeepEqual(plain.Tools, Filter{}) || !reflect.DeepEqual(plain.Prompts, Filter{}) || !plain.Tools.Selects("anything") {
		t.Errorf("an upstream without filters: %+v %+v", plain.Tools, plain.Prompts)
	}
}

// TestFilterMistakesReportedAtOnce: every mistake in the filter blocks is reported with
// its position, in one run, along with the file's other problems.
func TestFilterMistakesReportedAtOnce(t *testing.T) {
	src := `upstream "gh" {
  command = ["gh"]
  timeout = "soon"
  tools {
    include = ["*", "bad\\"]
    exclude = []
  }
  tools {
    include = [""]
  }
  tool "a" {
    name = "same"
  }
  tool "b" {
    name = "same"
  }
  tool "a" {
    name = "has space"
  }
  tool "c" {
    name = "d"
  }
  tool "d" {
    title = "kept"
  }
  tool "" {
    name = ` + "\"" + strings.Repeat("x", 129) + "\"" + `
  }
  prompts {
    include = []
  }
  prompt "p" {
    name = "p/q"
  }
}

upstream "other" {
  command   = ["o"]
  namespace = ""
  tool "x" {
    name = "gh__same"
  }
}
`
	got := mustFail(t, src, fakeEnv(nil))
	want := strings.Join([]string{
		`p.hcl:3:13: error: Invalid duration; "soon" is not a valid duration for "timeout"; use a duration string such as "60s", "1m30s" or "500ms".`,
		`p.hcl:5:15: error: Invalid pattern; "include": pattern "bad\\" ends with a lone backslash.`,
		`p.hcl:6:15: error: Empty pattern list; exclude = [] is ambiguous: remove "exclude" to match every one, or list the patterns to match.`,
		`p.hcl:8:3: error: Duplicate tools block; Only one tools block is allowed; the first one is at p.hcl:4:3.`,
		`p.hcl:9:15: error: Invalid pattern; "include" must not hold an empty pattern.`,
		`p.hcl:15:12: error: Name collision; tool "b" is renamed to "same", which tool "a" is also renamed to, at p.hcl:12:12; two tools of one upstream cannot share a name.`,
		`p.hcl:17:8: error: Duplicate tool block; There is already a tool "a" block in this upstream, at p.hcl:11:3.`,
		`p.hcl:18:12: error: Invalid name; "name" must be 1 to 128 characters, each a letter, a digit, '_', '.' or '-', got "has space".`,
		`p.hcl:21:12: error: Name collision; tool "c" is renamed to "d", which is the name of tool "d", configured at p.hcl:23:3; two tools of one upstream cannot share a name.`,
		`p.hcl:26:8: error: Invalid tool block; The label of a tool block is the upstream's own name of the tool; it must not be empty.`,
		`p.hcl:27:12: error: Invalid name; "name" must be 1 to 128 characters, each a letter, a digit, '_', '.' or '-', got "` + strings.Repeat("x", 129) + `".`,
		`p.hcl:30:15: error: Empty pattern list; include = [] is ambiguous: remove "include" to match every one, or list the patterns to match.`,
		`p.hcl:33:12: error: Invalid name; "name" must be 1 to 128 characters, each a letter, a digit, '_', '.' or '-', got "p/q".`,
		`p.hcl:41:12: error: Name collision; tool "x" of upstream "other" is renamed to "gh__same", exposed as "gh__same", as is tool "a" of upstream "gh" (p.hcl:12:12); names exposed by different upstreams must differ.`,
	}, "\n") + "\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestFilterWarnings(t *testing.T) {
	src := `proxy {
  max_name_length = 20
}
upstream "gh" {
  command = ["gh"]
  tools {
    exclude = ["delete_*"]
  }
  tool "delete_repo" {
    title = "never shown"
  }
  tool "get" {
  }
  tool "list" {
    name = "list"
  }
  tool "search" {
    name = "search_everything_everywhere"
  }
}
`
	cfg, diags := ParseWithOptions([]byte(src), "p.hcl", "/base", fakeEnv(nil))
	if cfg == nil || diags.HasErrors() {
		t.Fatalf("warnings must not fail the load:\n%s", FormatDiagnostics(diags))
	}
	got := FormatDiagnostics(diags)
	want := strings.Join([]string{
		`p.hcl:9:8: warning: Block has no effect; The tools block's include and exclude leave tool "delete_repo" out, so this block changes nothing.`,
		`p.hcl:12:3: warning: Empty tool block; The tool "get" block sets none of name, title, description and screen_allow; it changes nothing.`,
		`p.hcl:15:5: warning: Setting has no effect; tool "list" is renamed to its own name.`,
		`p.hcl:18:12: warning: Name too long; tool "search" would be exposed as "gh__search_everything_everywhere", longer than max_name_length (20); it is shortened with a hash instead.`,
	}, "\n") + "\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if o := cfg.Upstreams[0].Tools.Overrides[2]; o.Original != "list" || o.Name != "" {
		t.Errorf("a rename to its own name is no rename: %+v", o)
	}
}

// TestFilterSwapAndDisabled: renames may swap two names; a disabled upstream's renames
// do not collide with anything; a collision with no rename on either side (two
// unprefixed upstreams configuring a tool of the same name) is the router's to resolve,
// as for any tool.
func TestFilterSwapAndDisabled(t *testing.T) {
	src := `upstream "a" {
  command   = ["a"]
  namespace = ""
  tool "x" {
    name = "y"
  }
  tool "y" {
    name = "x"
  }
}
upstream "b" {
  command   = ["b"]
  namespace = ""
  tool "q" {
    description = "b's q"
  }
}
upstream "d" {
  command   = ["d"]
  namespace = ""
  tool "q" {
    description = "d's q"
  }
}
upstream "c" {
  command   = ["c"]
  namespace = ""
  disabled  = true
  tool "z" {
    name = "y"
  }
}
`
	cfg := mustParse(t, src, fakeEnv(nil))
	if got := cfg.Upstreams[0].Tools.Overrides; len(got) != 2 || got[0].Exposed() != "y" || got[1].Exposed() != "x" {
		t.Errorf("swap: %+v", got)
	}
	// A rename onto a name another upstream's block keeps is known to collide.
	bad := strings.Replace(src, `tool "q" {
    description = "b's q"`, `tool "x" {
    description = "b's x"`, 1)
	got := mustFail(t, bad, fakeEnv(nil))
	want := `p.hcl:8:12: error: Name collision; tool "y" of upstream "a" is renamed to "x", exposed as "x", as is tool "x" of upstream "b" (p.hcl:14:8); names exposed by different upstreams must differ.` + "\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
