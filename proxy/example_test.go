package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/proxy"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/transport"
)

// greeter is an MCP server written in Go with one tool, greet. It serves the server end
// of a transport.Pipe until the proxy stops the link.
func greeter(srv *transport.MemServer) {
	defer srv.Close()
	for {
		m, err := srv.Read()
		if err != nil {
			return // io.EOF: the proxy stopped the link
		}
		if !m.IsRequest() {
			continue // notifications/initialized, cancellations
		}
		switch m.Method {
		case mcp.MethodInitialize:
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(m.Params, &p)
			res, _ := json.Marshal(map[string]any{
				"protocolVersion": p.ProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "greeter", "version": "1.0.0"},
			})
			srv.Write(jsonrpc.NewResult(m.ID, res))
		case mcp.MethodToolsList:
			srv.Write(jsonrpc.NewResult(m.ID, json.RawMessage(`{"tools":[{"name":"greet","description":"Greets someone.",`+
				`"inputSchema":{"type":"object","properties":{"name":{"type":"string"}}}}]}`)))
		case mcp.MethodToolsCall:
			var p struct {
				Arguments struct {
					Name string `json:"name"`
				} `json:"arguments"`
			}
			json.Unmarshal(m.Params, &p)
			text, _ := json.Marshal("Hello, " + p.Arguments.Name + "!")
			srv.Write(jsonrpc.NewResult(m.ID, json.RawMessage(`{"content":[{"type":"text","text":`+string(text)+`}]}`)))
		default:
			srv.Write(jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"}))
		}
	}
}

// dialGreeter opens a link to a new greeter: the proxy calls it for every start of the
// upstream.
func dialGreeter(context.Context) (transport.Link, error) {
	link, srv := transport.Pipe(0)
	go greeter(srv)
	return link, nil
}

// logCalls is a middleware: it says which tool each call goes to, then passes it on.
func logCalls(next router.Handler) router.Handler {
	return func(ctx context.Context, c *router.Call, reply router.Reply) {
		fmt.Printf("middleware: %s %s, upstream %s\n", c.Method, c.Target.Name, c.Target.Upstream)
		next(ctx, c, reply)
	}
}

// A proxy of one in-process upstream and a middleware, built without a configuration
// file, calling a tool through the chain.
func Example() {
	ctx := context.Background()
	p, err := proxy.New(ctx, nil, // no file: the defaults, and the program's own upstream
		proxy.WithUpstream("greeter", dialGreeter),
		proxy.WithMiddleware(logCalls),
		proxy.Oneshot(), // no client: the program lists and calls itself
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	if err := p.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range p.Router().Tools() {
		fmt.Println("tool:", t.Name)
	}
	res, err := p.Router().Call(ctx, &router.Request{Method: mcp.MethodToolsCall,
		Params: json.RawMessage(`{"name":"greeter__greet","arguments":{"name":"Ada"}}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res))
	// Output:
	// tool: greeter__greet
	// middleware: tools/call greeter__greet, upstream greeter
	// {"content":[{"type":"text","text":"Hello, Ada!"}]}
}

// A binary of your own: a configuration with the upstream and the middleware built in,
// served to one client on two streams. A real main reads its file with
// proxy.Load("proxy.hcl", os.Stderr) and passes os.Stdin and os.Stdout; here the
// configuration is the defaults with a name, and the client is played over pipes.
func ExampleProxy_ServeStdio() {
	ctx := context.Background()
	cfg := config.Defaults()
	cfg.Proxy.Name = "team-proxy"
	p, err := proxy.New(ctx, cfg,
		proxy.WithUpstream("greeter", dialGreeter),
		proxy.WithMiddleware(logCalls),
		proxy.WithVersion("1.2.3"),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	stdin, toProxy := io.Pipe()
	fromProxy, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, stdin, stdout) }() // closes p when the client goes

	client := bufio.NewScanner(fromProxy)
	ask := func(line string) {
		fmt.Fprintln(toProxy, line)
		for client.Scan() { // the answer, past any notification
			if strings.Contains(client.Text(), `"id":`) {
				fmt.Println(client.Text())
				return
			}
		}
	}
	ask(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},` +
		`"clientInfo":{"name":"example","version":"1"}}}`)
	fmt.Fprintln(toProxy, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	ask(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greeter__greet","arguments":{"name":"Grace"}}}`)
	go io.Copy(io.Discard, fromProxy)
	toProxy.Close() // the client goes
	err = <-done
	stdout.Close()
	fmt.Println("served:", err)
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{"listChanged":true}},"protocolVersion":"2025-06-18","serverInfo":{"name":"team-proxy","version":"1.2.3"}}}
	// middleware: tools/call greeter__greet, upstream greeter
	// {"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Hello, Grace!"}]}}
	// served: <nil>
}
