package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"
)

// toolPingClient pings the client (the proxy) with a request of the server's own and
// reports the answer: the proxy must answer an upstream's ping itself.
const toolPingClient = "ping_client"

// outgoing tracks the server's own requests to its client.
type outgoing struct {
	next    atomic.Int64
	waiting chan incoming // the one answer awaited at a time
}

func pingClient(ctx context.Context, s *server, _ *toolCall) (json.RawMessage, *rpcError) {
	id := fmt.Sprintf(`"srv-%d"`, s.outgoing.next.Add(1))
	if err := s.out.writeLine([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)); err != nil {
		return errorResult("writing ping: " + err.Error())
	}
	select {
	case resp := <-s.outgoing.waiting:
		if string(resp.ID) != id {
			return errorResult("answer for " + string(resp.ID) + ", want " + id)
		}
		if len(resp.Error) > 0 {
			return errorResult("ping answered with error " + string(resp.Error))
		}
		return textResult("client answered ping: " + string(resp.Result))
	case <-time.After(5 * time.Second):
		return errorResult("the client did not answer ping")
	case <-ctx.Done():
		return nil, nil
	}
}
