package policy

import (
	"encoding/json"
	"testing"
)

// TestFastConditionsAgreeWithHCL: every compiled condition decides exactly as HCL
// evaluation does, on strings, missing arguments, other types and non-ASCII text.
func TestFastConditionsAgreeWithHCL(t *testing.T) {
	conds := []string{
		`under(args.path, "/srv/data")`,
		`startswith(args.path, "/etc")`,
		`endswith(args.name, ".csv") && !contains(args.name, "..")`,
		`args.mode == "read" || args["mode"] == "list"`,
		`"admin" != args.role`,
		`(startswith(args.path, "/a") || startswith(args.path, "/b")) && args.mode != "write"`,
	}
	inputs := []string{
		`{"path":"/srv/data/x.csv","name":"r.csv","mode":"read","role":"dev"}`,
		`{"path":"/etc/passwd","name":"..csv","mode":"write","role":"admin"}`,
		`{"path":"/srv/data/../../etc","mode":"list"}`,
		`{"path":7,"name":true,"mode":null}`,
		`{"path":["/a"],"mode":{"x":1}}`,
		`{}`,
		``,
		`{"path":"/b/é","name":"é.csv","mode":"read","role":"x"}`,
	}
	e, err := NewEngine(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range conds {
		x := expr(t, src)
		fast := compileFast(x)
		if fast == nil {
			t.Errorf("%s: not compiled", src)
			continue
		}
		e.argKeys, e.allArgs = nil, true
		for _, in := range inputs {
			args := json.RawMessage(in)
			fv, ferr, ok := fast(args)
			if !ok {
				continue // HCL decides these
			}
			hv, herr := evalCondition(x, e.evalVars(alice, tool("t", "u", ""), args))
			if (ferr != nil) != (herr != nil) || (ferr == nil && fv != hv) {
				t.Errorf("%s on %s: fast %v/%v, HCL %v/%v", src, in, fv, ferr, hv, herr)
			}
		}
	}
	for _, src := range []string{`length(args.l) > 2`, `principal.name == "x"`, `startswith(args.p, "${args.q}")`, `try(startswith(args.p, "/x"), false)`} {
		if compileFast(expr(t, src)) != nil {
			t.Errorf("%s: compiled, but it is outside the fast subset", src)
		}
	}
}
