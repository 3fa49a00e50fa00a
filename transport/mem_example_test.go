package transport_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// A server written in Go, on the other end of an in-memory link: it answers every request
// with the method's name, and exits when its input ends.
func ExamplePipe() {
	link, srv := transport.Pipe(0)
	go func() {
		defer srv.Close()
		for {
			m, err := srv.Read()
			if err != nil {
				return // io.EOF: the proxy stopped the link
			}
			if m.IsRequest() {
				name, _ := json.Marshal(m.Method)
				srv.Write(jsonrpc.NewResult(m.ID, json.RawMessage(`{"echo":`+string(name)+`}`)))
			}
		}
	}()

	link.Write(jsonrpc.NewRequest(jsonrpc.IntID(1), "tools/list", nil))
	line, _ := link.ReadLine()
	fmt.Println(string(line))

	link.Stop(time.Second) // closes the server's input; it exits at once
	fmt.Println("exit error:", link.ExitErr())
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"echo":"tools/list"}}
	// exit error: <nil>
}
