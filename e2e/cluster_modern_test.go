package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

// modernMeta is the _meta of the modern test client: it can sample, elicit and list roots.
const clusterModernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{},"roots":{}}}`

// modernRound is one answer to a modern tools/call: its result's type, requestState and
// input requests, or its error, and the replica HAProxy says served it ("" when sent
// straight to a replica).
type modernRound struct {
	resultType, state, text string
	inputs                  map[string]struct {
		Method string `json:"method"`
	}
	errCode  int64
	errMsg   string
	servedBy string
	raw      string
}

// modernTool sends a modern tools/call of tool to url, with extra params (a requestState
// and inputResponses), and reads its answer (JSON or an event stream).
func modernTool(ctx context.Context, t *testing.T, url, tool, extra string) modernRound {
	t.Helper()
	return modernToolAs(ctx, t, url, "", tool, extra)
}

// modernToolAs is modernTool with an API key ("" for none).
func modernToolAs(ctx context.Context, t *testing.T, url, key, tool, extra string) modernRound {
	t.Helper()
	c := &httpWire{t: t, url: url}
	h := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool}
	if key != "" {
		h["Authorization"] = "Bearer " + key
	}
	r := c.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":{"prompt":"hi"},%s%s}}`,
		tool, extra, clusterModernMeta), h)
	body := r.body
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range readWireEvents(bytes.NewReader(r.body), nil) {
			if strings.Contains(ev.data, `"id":7`) {
				body = []byte(ev.data)
			}
		}
	}
	var m struct {
		Result *struct {
			ResultType   string `json:"resultType"`
			RequestState string `json:"requestState"`
			Inputs       map[string]struct {
				Method string `json:"method"`
			} `json:"inputRequests"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil || (m.Result == nil && m.Error == nil) {
		t.Fatalf("%s at %s: HTTP %d: %v: %s", tool, url, r.status, err, r.body)
	}
	out := modernRound{servedBy: r.header.Get("X-Served-By"), raw: string(body)}
	if m.Error != nil {
		out.errCode, out.errMsg = m.Error.Code, m.Error.Message
		return out
	}
	out.resultType, out.state, out.inputs = m.Result.ResultType, m.Result.RequestState, m.Result.Inputs
	for _, c := range m.Result.Content {
		out.text += c.Text
	}
	return out
}

// answerInputs is the retry's params answering every input request of round: a sampled
// message, an accepted form, one root.
func answerInputs(t *testing.T, round modernRound) string {
	t.Helper()
	var parts []string
	for k, in := range round.inputs {
		var ans string
		switch in.Method {
		case "sampling/createMessage":
			ans = `{"role":"assistant","content":{"type":"text","text":"from the client"},"model":"m"}`
		case "elicitation/create":
			ans = `{"action":"accept","content":{"name":"Ada","username":"ada","confirm":true,"color":"blue"}}`
		case "roots/list":
			ans = `{"roots":[{"uri":"file:///cluster/root","name":"root"}]}`
		default:
			t.Fatalf("unexpected input request %s: %s", in.Method, round.raw)
		}
		parts = append(parts, fmt.Sprintf("%q:%s", k, ans))
	}
	state := ""
	if round.state != "" { // a modern upstream's first round may have none
		state = fmt.Sprintf(`"requestState":%q,`, round.state)
	}
	return fmt.Sprintf(`%s"inputResponses":{%s},`, state, strings.Join(parts, ","))
}

// TestClusterModernInput: a modern (2026-07-28) client's call that needs its input
// completes across replicas. With a legacy upstream the proxy parks the upstream's call
// on the replica that answered input_required and names that replica in its
// requestState: the retry, sent straight to another replica or through HAProxy
// round-robin (which sends it elsewhere), is forwarded there and completes. With a modern
// upstream the requestState is the upstream's own, bound to the principal under the
// cluster's shared key: any replica takes the retry itself. A requestState naming a
// replica that is not registered, or one that was killed, is a clear -32602.
func TestClusterModernInput(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, everythingUpstreamEra("ev", "ev", "legacy")+everythingUpstreamEra("em", "em", "modern"),
		`key = "0123456789abcdef0123456789abcdef-e2e"`)
	ctx := ctxT(t, 120*time.Second)
	at := func(r *topology.Replica) string { return "http://" + r.Addr + "/mcp" }
	r0, r1 := topo.Replicas[0], topo.Replicas[1]

	// complete runs tool's rounds, the first at first() and the retries at retryAt(), and
	// returns the requestStates the rounds handed out.
	complete := func(name string, first, retryAt func() string, tool, want string) (states []string) {
		t.Helper()
		round := modernTool(ctx, t, first(), tool, "")
		for i := 0; round.resultType == "input_required"; i++ {
			if i > 5 {
				t.Fatalf("%s: more than 5 rounds", name)
			}
			if len(round.inputs) == 0 {
				t.Fatalf("%s: input_required without inputs: %s", name, round.raw)
			}
			if round.state != "" {
				states = append(states, round.state)
			}
			prev := round
			round = modernTool(ctx, t, retryAt(), tool, answerInputs(t, prev))
			if prev.servedBy != "" && prev.servedBy == round.servedBy {
				t.Errorf("%s: HAProxy sent the retry to %s again; the test needs another replica", name, round.servedBy)
			}
		}
		if round.errCode != 0 || round.resultType != "complete" || !strings.Contains(round.text, want) {
			t.Errorf("%s: %+v\n%s", name, round, round.raw)
		}
		return states
	}
	direct := func(r *topology.Replica) func() string { return func() string { return at(r) } }
	through := func() string { return topo.URL() }

	// A legacy upstream: the call is parked on r0; the retry goes to r1, which forwards it.
	first := modernTool(ctx, t, at(r0), "ev__test_sampling", "")
	if first.resultType != "input_required" || !strings.HasPrefix(first.state, "r.") {
		t.Fatalf("legacy upstream: want input_required with a handle naming a replica: %s", first.raw)
	}
	complete("legacy upstream, r0 then r1", direct(r0), direct(r1), "ev__test_sampling", "from the client")
	complete("legacy upstream, through HAProxy", through, through, "ev__test_sampling", "from the client")

	// A modern upstream: its own requestState (if any), wrapped; no forwarding needed.
	complete("modern upstream, r0 then r1", direct(r0), direct(r1), "em__test_input_required_result_elicitation", "Ada")
	states := complete("modern upstream, several rounds, r0 then r1", direct(r0), direct(r1), "em__test_input_required_result_multi_round", "")
	states = append(states, complete("modern upstream, several rounds, through HAProxy", through, through, "em__test_input_required_result_multi_round", "")...)
	if len(states) == 0 {
		t.Errorf("the multi-round tool handed out no requestState: the test proves nothing about wrapped states")
	}
	for _, st := range states {
		if !strings.HasPrefix(st, "w.") {
			t.Errorf("a modern upstream's requestState is not wrapped: %q", st)
		}
	}

	// A handle naming a replica that is not registered: refused, not forwarded anywhere.
	forged := first.state
	if _, rest, ok := strings.Cut(strings.TrimPrefix(forged, "r."), "."); ok {
		forged = "r.0badc0de." + rest
	}
	bad := modernTool(ctx, t, at(r1), "ev__test_sampling", fmt.Sprintf(`"requestState":%q,"inputResponses":{},`, forged))
	if bad.errCode != -32602 || !strings.Contains(bad.errMsg, "requestState") {
		t.Errorf("a handle naming an unknown replica: %+v", bad)
	}

	// The replica holding a parked call is killed: the retry elsewhere is told to start
	// over, and the call is not served by anyone else.
	parked := modernTool(ctx, t, at(r0), "ev__test_sampling", "")
	if parked.resultType != "input_required" {
		t.Fatalf("parking a call on r0: %s", parked.raw)
	}
	r0.Kill()
	// Refused connections say the replica is gone (-32602: start over); a connection to
	// it that was open already breaks instead, which the forwarder cannot tell from a
	// replica that failed while answering (-32603, the proxy's, data.origin mcp-proxy).
	lost := modernTool(ctx, t, at(r1), "ev__test_sampling", answerInputs(t, parked))
	gone := lost.errCode == -32602 && strings.Contains(lost.errMsg, "without requestState")
	broke := lost.errCode == -32603 && strings.Contains(lost.errMsg, "mcp-proxy") && strings.Contains(lost.raw, `"origin":"mcp-proxy"`)
	if !gone && !broke {
		t.Errorf("retry of a call parked on a killed replica: %+v", lost)
	}
	if again := modernTool(ctx, t, at(r1), "ev__test_sampling", ""); again.resultType != "input_required" {
		t.Errorf("starting the call again: %s", again.raw)
	}
}

// TestClusterModernInputAuth: with authentication, a retry forwarded to the replica that
// parked the call carries the client's credentials there (the replica authenticates it
// again), and the handle is bound to its principal: alice's retry through another
// replica completes, bob's is refused.
func TestClusterModernInputAuth(t *testing.T) {
	front, err := topology.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	topo := startCluster(t, front, clusterBase(front)+everythingUpstreamEra("ev", "ev", "legacy"), `key = "0123456789abcdef0123456789abcdef-e2e"`)
	ctx := ctxT(t, 120*time.Second)
	at := func(r *topology.Replica) string { return "http://" + r.Addr + "/mcp" }
	first := modernToolAs(ctx, t, at(topo.Replicas[0]), aliceKey, "ev__test_sampling", "")
	if first.resultType != "input_required" || !strings.HasPrefix(first.state, "r.") {
		t.Fatalf("alice's call: %s", first.raw)
	}
	answer := answerInputs(t, first)
	if bob := modernToolAs(ctx, t, at(topo.Replicas[1]), bobKey, "ev__test_sampling", answer); bob.errCode != -32602 {
		t.Errorf("bob's retry of alice's call: %+v", bob)
	}
	if done := modernToolAs(ctx, t, at(topo.Replicas[1]), aliceKey, "ev__test_sampling", answer); done.errCode != 0 || !strings.Contains(done.text, "from the client") {
		t.Errorf("alice's retry through r1: %+v", done)
	}
}
