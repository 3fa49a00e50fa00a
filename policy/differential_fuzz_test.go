package policy

import (
	"encoding/json"
	"reflect"
	"testing"

	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// FuzzConditionSeesWhatUpstreamReads: for any arguments object a client can send that the
// proxy accepts, the value a condition sees (args) equals the value an upstream written
// with Go's encoding/json reads from the forwarded params (which matches member names
// without case and keeps the last of two). A request that would read differently must
// be refused before the policy runs, or by every rule that has a condition.
func FuzzConditionSeesWhatUpstreamReads(f *testing.F) {
	for _, s := range []string{
		`{"path":"/srv/data/ok"}`,
		`{"path":"/srv/data/ok","path":"/etc/passwd"}`,
		`{"path":"/srv/data/ok","p\u0061th":"/etc/passwd"}`,
		`{"path":"/srv/data/ok","PATH":"/etc/passwd"}`,
		`{"a":{"b":[1,2,{"c":"d"}]},"n":1.5e3,"t":true,"z":null}`,
		`{"\u212Aey":1,"key":2}`,
	} {
		f.Add([]byte(s))
	}
	e := &Engine{allArgs: true}
	f.Fuzz(func(t *testing.T, args []byte) {
		msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":` + string(args) + `}}`)
		m, err := jsonrpc.Decode(msg)
		if err != nil {
			return // refused: nothing reaches the policy or the upstream
		}
		raw, ok, _ := jsonx.Get(m.Params, "arguments")
		if !ok || len(raw) == 0 || raw[0] != '{' {
			return
		}
		if checkArgs(raw) != nil {
			return // refused by every rule with a condition
		}
		seen := e.evalVars(nil, &Item{}, raw)["args"]
		policyJSON, err := ctyjson.Marshal(seen, seen.Type())
		if err != nil {
			t.Fatalf("marshal policy view: %v", err)
		}
		var policyView, upstreamView map[string]any
		if err := json.Unmarshal(policyJSON, &policyView); err != nil {
			t.Fatalf("policy view %s: %v", policyJSON, err)
		}
		var params struct {
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal(m.Params, &params); err != nil {
			return // the upstream would refuse it too
		}
		upstreamView = params.Arguments
		if len(policyView) == 0 && len(upstreamView) == 0 {
			return
		}
		if !reflect.DeepEqual(policyView, upstreamView) {
			t.Fatalf("arguments %s: the policy sees %v, the upstream reads %v", args, policyView, upstreamView)
		}
	})
}
