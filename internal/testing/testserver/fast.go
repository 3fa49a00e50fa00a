package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
)

// fastServer is the -fast mode: a minimal upstream for latency benchmarks.
// It knows initialize, ping, tools/list (one tool, echo) and tools/call of
// echo, which answers "ok". It handles each request inline on the reading
// goroutine and decodes only the fields it needs, reusing its buffers.
// Of the other flags it honours -name, -version, -instructions, -banner,
// -stderr-chatter, -initialized-error and -exit-after.
type fastServer struct {
	cfg  *config
	out  *lineWriter
	log  *log.Logger
	exit func(*exitError)
}

func newFastServer(cfg *config, out *lineWriter, logger *log.Logger, exit func(*exitError)) *fastServer {
	return &fastServer{cfg: cfg, out: out, log: logger, exit: exit}
}

// fastMethod is a method name decoded without allocating.
type fastMethod uint8

const (
	fastUnknown fastMethod = iota
	fastInitialize
	fastPing
	fastToolsList
	fastToolsCall
	fastInitialized
	fastAbsent // no method at all: a response, or not a message
)

func (m fastMethod) String() string {
	switch m {
	case fastInitialize:
		return methodInitialize
	case fastPing:
		return methodPing
	case fastToolsList:
		return methodToolsList
	case fastToolsCall:
		return methodToolsCall
	case fastInitialized:
		return notifInitialized
	default:
		return "unknown"
	}
}

func (m *fastMethod) UnmarshalJSON(b []byte) error {
	switch string(b) { // no allocation; an escaped name is unknown
	case `"initialize"`:
		*m = fastInitialize
	case `"ping"`:
		*m = fastPing
	case `"tools/list"`:
		*m = fastToolsList
	case `"tools/call"`:
		*m = fastToolsCall
	case `"notifications/initialized"`:
		*m = fastInitialized
	default:
		*m = fastUnknown
	}
	return nil
}

// fastMessage holds the fields -fast reads. Its raw fields are reused from
// one message to the next.
type fastMessage struct {
	ID     json.RawMessage `json:"id"`
	Method fastMethod      `json:"method"`
	Params struct {
		Name            json.RawMessage `json:"name"`
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
	} `json:"params"`
}

func (m *fastMessage) reset() {
	m.ID = m.ID[:0]
	m.Method = fastAbsent
	m.Params.Name = m.Params.Name[:0]
	m.Params.ProtocolVersion = m.Params.ProtocolVersion[:0]
}

var (
	fastPingResult     = []byte(`{}`)
	fastToolsResult    = []byte(`{"tools":[{"name":"echo","description":"Answers ok.","inputSchema":{"type":"object"}}]}`)
	fastEchoResult     = []byte(`{"content":[{"type":"text","text":"ok"}]}`)
	fastEchoName       = `"echo"`
	fastCapabilities   = json.RawMessage(`{"tools":{}}`)
	fastParseError     = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)
	fastMethodNotFound = []byte(`{"code":-32601,"message":"Method not found"}`)
	fastNotARequest    = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"notifications are not requests"}}`)
)

func (f *fastServer) serve(ctx context.Context, stdin io.Reader) error {
	lr := newLineReader(stdin)
	var msg fastMessage
	var handled int64
	for ctx.Err() == nil {
		line, err := lr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading stdin: %w", err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		msg.reset()
		if err := json.Unmarshal(line, &msg); err != nil {
			f.write(fastParseError)
			continue
		}
		if f.cfg.chatter {
			f.log.Printf("received method=%q id=%s", msg.Method, msg.ID)
		}
		if len(msg.ID) == 0 {
			if msg.Method == fastInitialized && f.cfg.initializedError {
				f.write(fastNotARequest)
			}
			continue
		}
		f.respond(f.out, &msg)
		if handled++; f.cfg.exitAfter > 0 && handled == f.cfg.exitAfter {
			f.log.Printf("exiting after %d requests", handled)
			f.out.close()
			f.exit(&exitError{code: 4, reason: fmt.Sprintf("exit after %d requests", handled)})
			return nil
		}
	}
	return nil
}

// respond writes the response to the request msg on out: stdout in stdio mode, the HTTP
// response body in -http mode.
func (f *fastServer) respond(out *lineWriter, msg *fastMessage) {
	var err error
	switch msg.Method {
	case fastPing:
		err = writeResult(out, msg.ID, fastPingResult)
	case fastToolsList:
		err = writeResult(out, msg.ID, fastToolsResult)
	case fastToolsCall:
		if string(msg.Params.Name) == fastEchoName {
			err = writeResult(out, msg.ID, fastEchoResult)
		} else {
			var name string
			_ = json.Unmarshal(msg.Params.Name, &name) // absent or not a string: reported as ""
			err = writeError(out, msg.ID, &rpcError{Code: codeInvalidParams, Message: "Unknown tool: " + name})
		}
	case fastInitialize:
		f.cfg.holdInitialize(context.Background())
		err = f.initialize(out, msg)
	default:
		err = out.writeLine(responsePrefix, msg.ID, errorInfix, fastMethodNotFound, responseSuffix)
	}
	if err != nil && !errors.Is(err, errOutputClosed) {
		f.log.Printf("writing response: %v", err)
	}
}

func (f *fastServer) initialize(out *lineWriter, msg *fastMessage) error {
	var requested string
	_ = json.Unmarshal(msg.Params.ProtocolVersion, &requested) // absent or not a string: the latest
	result, err := encode(initializeResult{
		ProtocolVersion: negotiateVersion(f.cfg.version, requested),
		Capabilities:    fastCapabilities,
		ServerInfo:      implementation{Name: f.cfg.name, Version: "1.0.0"},
		Instructions:    f.cfg.instructions,
	})
	if err != nil {
		return err
	}
	return writeResult(out, msg.ID, result)
}

func (f *fastServer) write(line []byte) {
	if err := f.out.writeLine(line); err != nil && !errors.Is(err, errOutputClosed) {
		f.log.Printf("writing: %v", err)
	}
}

func (f *fastServer) stop()  {}
func (f *fastServer) drain() {}
