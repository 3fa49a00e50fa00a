package upstream

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// TestExchangeCarriesItsOrigin: on a link where each request is an exchange of its own
// (HTTP), a server request that arrives on a call's own answer goes to that call's
// client (its Input), progress and the response arrive through the exchange too, and a
// server request on the shared stream goes to the events, which attribute it.
func TestExchangeCarriesItsOrigin(t *testing.T) {
	ev := newRecEvents()
	ev.answer = func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, *jsonrpc.Error) {
		return json.RawMessage(`{"from":"events"}`), nil
	}
	link := exchangeLink{newMemLink()}
	u, err := startMem(t, Spec{}, ev, legacyServer(`{"tools":{}}`, nil, nil), link)
	if err != nil {
		t.Fatal(err)
	}
	progress := make(chan json.RawMessage, 4)
	ch := u.sendAsync(context.Background(), &Request{Method: "tools/call", Timeout: time.Minute,
		Params:   json.RawMessage(`{"name":"t","_meta":{"progressToken":"client-tok"}}`),
		Progress: func(p json.RawMessage) { progress <- p },
		Input: func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			return json.RawMessage(`{"from":"the call"}`), nil
		}})
	sent := u.next(t, "tools/call")
	token := string(mustGet(mustGet(sent.Params, "_meta"), "progressToken"))

	// On the call's own answer: progress, a server request, then the response.
	link.answerOn(sent.ID.Raw(), `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`+token+`,"progress":1}}`)
	if p := recvT(t, progress); string(mustGet(p, "progressToken")) != `"client-tok"` {
		t.Errorf("progress on the exchange: %s", p)
	}
	link.answerOn(sent.ID.Raw(), `{"jsonrpc":"2.0","id":"q","method":"sampling/createMessage","params":{}}`)
	if m := u.next(t, ""); m.ID.Raw() != `"q"` || string(m.Result) != `{"from":"the call"}` {
		t.Errorf("a server request on the call's own answer: %+v", m)
	}
	// The same request on the shared stream: the events attribute it.
	link.push(`{"jsonrpc":"2.0","id":"g","method":"sampling/createMessage","params":{}}`)
	if m := u.next(t, ""); m.ID.Raw() != `"g"` || string(m.Result) != `{"from":"events"}` {
		t.Errorf("a server request on the shared stream: %+v", m)
	}
	link.answerOn(sent.ID.Raw(), `{"jsonrpc":"2.0","id":`+sent.ID.Raw()+`,"result":{"content":[]}}`)
	if r := recvT(t, ch); r.err != nil || r.msg == nil || string(r.msg.Result) != `{"content":[]}` {
		t.Errorf("the response on the exchange: %+v", r)
	}
}
