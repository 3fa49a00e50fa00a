package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Names of the built-in tools.
const (
	toolEcho    = "echo"
	toolSlow    = "slow"
	toolCrash   = "crash"
	toolBig     = "big"
	toolFail    = "fail"
	toolGarbage = "garbage"
	toolEnv     = "env"
	toolCwd     = "cwd"
	toolWhoami  = "whoami"

	toolEchoMeta = "echo_meta" // with -echo-meta
	toolFlood    = "flood"     // with -flood
)

var (
	// longToolName is exactly 70 characters, over the 64 some clients allow.
	longToolName = "long_name_" + strings.Repeat("a", 70-len("long_name_"))
	// veryLongToolName is exactly 140 characters.
	veryLongToolName = "very_long_name_" + strings.Repeat("b", 140-len("very_long_name_"))
)

const (
	defaultBigBytes = 5 << 20
	maxBigBytes     = 1 << 30
)

// Input schemas.
const (
	schemaAny    = `{"type":"object","additionalProperties":true}`
	schemaNone   = `{"type":"object","properties":{}}`
	schemaFlood  = `{"type":"object","properties":{"count":{"type":"integer","minimum":0},"bytes":{"type":"integer","minimum":0}},"required":["count"]}`
	schemaSlow   = `{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"description":"How long to sleep, in milliseconds."}},"required":["ms"]}`
	schemaBig    = `{"type":"object","properties":{"bytes":{"type":"integer","minimum":0,"description":"Length of the text; default 5 MiB."}}}`
	schemaEnvVar = `{"type":"object","properties":{"name":{"type":"string","description":"Environment variable to read."}},"required":["name"]}`
)

// toolCall is a tools/call request as the tool sees it.
type toolCall struct {
	id            json.RawMessage // the request id, verbatim
	params        json.RawMessage // the whole params, verbatim
	arguments     json.RawMessage // as received; may be absent
	progressToken json.RawMessage // absent unless the client asked for progress
}

// toolFunc runs a tool. Returning neither a result nor an error sends no
// response.
type toolFunc func(ctx context.Context, s *server, call *toolCall) (json.RawMessage, *rpcError)

type tool struct {
	name        string
	description string
	inputSchema string
	run         toolFunc
}

// fileTool is one tool of -tools-file.
type fileTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// readToolsFile reads the tools of -tools-file.
func readToolsFile(path string) ([]fileTool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ts []fileTool
	if err := json.Unmarshal(b, &ts); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range ts {
		if len(ts[i].InputSchema) == 0 {
			ts[i].InputSchema = json.RawMessage(schemaAny)
		}
	}
	return ts, nil
}

// catalogue is the fixed list of tools, with each definition encoded once.
// It is read-only after construction.
type catalogue struct {
	defs     [][]byte         // encoded definitions, in listing order
	byName   map[string]*tool // the last tool of a name wins
	pageSize int              // 0 means one page
}

func newCatalogue(cfg *config) *catalogue {
	tools := []*tool{
		{toolEcho, "Returns its arguments as text and as structuredContent.", schemaAny, echo("")},
		{toolSlow, "Sleeps ms milliseconds, sending progress if asked; honours cancellation.", schemaSlow, slow},
		{toolCrash, "Exits the server with status 3 without answering.", schemaNone, crash},
		{toolBig, "Returns one text of exactly bytes 'x' characters.", schemaBig, big},
		{toolFail, "Returns a tool error (isError: true).", schemaNone, fail},
		{toolGarbage, "Writes a non-JSON line and a truncated JSON line to stdout, then answers.", schemaNone, garbage},
		{toolEnv, "Returns the value of an environment variable.", schemaEnvVar, env},
		{toolCwd, "Returns the server's working directory.", schemaNone, cwd},
		{toolPingClient, "Pings the client and reports its answer.", schemaNone, pingClient},
		{longToolName, "Echo under a 70-character name.", schemaAny, echo("")},
		{veryLongToolName, "Echo under a 140-character name.", schemaAny, echo("")},
	}
	if cfg.dup != "" {
		tools = append(tools, &tool{cfg.dup, "Echo, prefixed with the name of server " + cfg.name + ".", schemaAny, echo("from " + cfg.name + ": ")})
	}
	if cfg.echoMeta {
		tools = append(tools, &tool{toolEchoMeta, "Returns the _meta of its call (its traceparent, say) as structuredContent.", schemaAny, echoCallMeta})
	}
	if cfg.whoami {
		tools = append(tools, &tool{toolWhoami, "Returns whom this server acts for: its process id, $WHOAMI, and over HTTP the subjects of the tokens its session carried.", schemaNone, whoami})
	}
	if cfg.flood {
		tools = append(tools, &tool{toolFlood, "Sends count notifications/message of bytes characters each as fast as it can, then answers.", schemaFlood, flood})
	}
	if cfg.files != "" {
		tools = append(tools, &tool{toolReadFile, "Returns the text of a file (checks nothing).", schemaReadFile, readFile})
	}
	for _, d := range cfg.fileTools {
		tools = append(tools, &tool{d.Name, d.Description, string(d.InputSchema), echo("")})
	}
	for i := 1; i <= cfg.extraTools; i++ {
		tools = append(tools, &tool{fmt.Sprintf("t%04d", i), fmt.Sprintf("Extra echo tool number %d.", i), schemaAny, echo("")})
	}

	c := &catalogue{byName: make(map[string]*tool, len(tools)), pageSize: cfg.page}
	for _, t := range tools {
		c.byName[t.name] = t
		name, _ := encode(t.name)        // encoding a string cannot fail
		desc, _ := encode(t.description) // nor here
		def := make([]byte, 0, 64+len(name)+len(desc)+len(t.inputSchema))
		def = append(def, `{"name":`...)
		def = append(def, name...)
		def = append(def, `,"description":`...)
		def = append(def, desc...)
		def = append(def, `,"inputSchema":`...)
		def = append(def, t.inputSchema...)
		c.defs = append(c.defs, append(def, '}'))
	}
	return c
}

const cursorPrefix = "offset="

func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(offset)))
}

func decodeCursor(cursor string) (int, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, false
	}
	digits, ok := strings.CutPrefix(string(raw), cursorPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n >= 0
}

// page returns the tools/list result starting at cursor ("" for the first
// page).
func (c *catalogue) page(cursor string) (json.RawMessage, *rpcError) {
	offset := 0
	if cursor != "" {
		n, ok := decodeCursor(cursor)
		if !ok || n > len(c.defs) {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Invalid cursor"}
		}
		offset = n
	}
	end := len(c.defs)
	if c.pageSize > 0 && offset+c.pageSize < end {
		end = offset + c.pageSize
	}
	b := []byte(`{"tools":[`)
	for i, def := range c.defs[offset:end] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, def...)
	}
	b = append(b, ']')
	if end < len(c.defs) {
		b = append(b, `,"nextCursor":"`...)
		b = append(b, encodeCursor(end)...)
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

func (s *server) callTool(ctx context.Context, msg *incoming) (json.RawMessage, *rpcError) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if e := decodeParams(msg.Params, &p); e != nil {
		return nil, e
	}
	t := s.tools.byName[p.Name]
	if t == nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "Unknown tool: " + p.Name}
	}
	call := &toolCall{id: msg.ID, params: msg.Params, arguments: p.Arguments}
	if !isAbsent(p.Meta.ProgressToken) {
		call.progressToken = p.Meta.ProgressToken
	}
	return t.run(ctx, s, call)
}

// Tool results.

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolResult struct {
	Content           []textContent   `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	Meta              json.RawMessage `json:"_meta,omitempty"`
}

func textResult(text string) (json.RawMessage, *rpcError) {
	return encodeResult(toolResult{Content: []textContent{{Type: "text", Text: text}}})
}

// errorResult is a tool error, which the model sees, as opposed to a
// JSON-RPC error.
func errorResult(text string) (json.RawMessage, *rpcError) {
	return encodeResult(toolResult{Content: []textContent{{Type: "text", Text: text}}, IsError: true})
}

// decodeArguments decodes the tool arguments into v. Absent arguments leave
// v alone.
func decodeArguments(call *toolCall, v any) error {
	if isAbsent(call.arguments) {
		return nil
	}
	if err := json.Unmarshal(call.arguments, v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// argumentsObject returns the arguments as compact JSON, {} when absent.
func argumentsObject(call *toolCall) (json.RawMessage, error) {
	if isAbsent(call.arguments) {
		return json.RawMessage(`{}`), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, call.arguments); err != nil {
		return nil, fmt.Errorf("invalid arguments: %w", err)
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, errors.New("invalid arguments: not a JSON object")
	}
	return buf.Bytes(), nil
}

var echoMeta = json.RawMessage(`{"dev.test/echo":true}`)

// echo returns a tool that answers with its arguments, as text after
// prefix and as structuredContent, plus a _meta, so every field of a
// result can be checked for pass-through.
func echo(prefix string) toolFunc {
	return func(_ context.Context, _ *server, call *toolCall) (json.RawMessage, *rpcError) {
		args, err := argumentsObject(call)
		if err != nil {
			return errorResult(err.Error())
		}
		return encodeResult(toolResult{
			Content:           []textContent{{Type: "text", Text: prefix + string(args)}},
			StructuredContent: args,
			Meta:              echoMeta,
		})
	}
}

// echoCallMeta returns the call's params._meta as it arrived ({} when it had none).
func echoCallMeta(_ context.Context, _ *server, call *toolCall) (json.RawMessage, *rpcError) {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(call.params, &p); err != nil {
		return errorResult(err.Error())
	}
	if len(p.Meta) == 0 || p.Meta[0] != '{' {
		p.Meta = json.RawMessage(`{}`)
	}
	return encodeResult(toolResult{
		Content:           []textContent{{Type: "text", Text: string(p.Meta)}},
		StructuredContent: p.Meta,
	})
}

// slow sleeps, sending progress 1..3 of 3 if a token was given. Cancelled,
// it returns without a response.
func slow(ctx context.Context, s *server, call *toolCall) (json.RawMessage, *rpcError) {
	var args struct {
		MS *int64 `json:"ms"`
	}
	if err := decodeArguments(call, &args); err != nil {
		return errorResult(err.Error())
	}
	if args.MS == nil || *args.MS < 0 {
		return errorResult("invalid arguments: ms must be a non-negative integer")
	}
	total := time.Duration(*args.MS) * time.Millisecond
	const steps = 3
	for i := 1; i <= steps; i++ {
		d := total / steps
		if i == steps {
			d = total - (steps-1)*(total/steps)
		}
		if !sleep(ctx, d) {
			if errors.Is(context.Cause(ctx), errCancelledByClient) {
				s.log.Printf("cancelled %s", call.id)
			}
			return nil, nil
		}
		if call.progressToken != nil {
			s.progress(call.progressToken, i, steps)
		}
	}
	return textResult(fmt.Sprintf("slept %dms", *args.MS))
}

// flood sends count log notifications as fast as the output takes them, then answers.
func flood(ctx context.Context, s *server, call *toolCall) (json.RawMessage, *rpcError) {
	var args struct {
		Count int `json:"count"`
		Bytes int `json:"bytes"`
	}
	if err := decodeArguments(call, &args); err != nil {
		return errorResult(err.Error())
	}
	if args.Count < 0 || args.Bytes < 0 || args.Bytes > maxBigBytes {
		return errorResult("invalid arguments: count and bytes must be non-negative (bytes at most 1 GiB)")
	}
	params, err := encode(struct {
		Level string `json:"level"`
		Data  string `json:"data"`
	}{"info", strings.Repeat("f", args.Bytes)})
	if err != nil {
		return errorResult(err.Error())
	}
	for i := 0; i < args.Count && ctx.Err() == nil; i++ {
		if err := writeNotification(s.out, "notifications/message", params); err != nil {
			return nil, nil // the output is gone
		}
	}
	return textResult(fmt.Sprintf("sent %d", args.Count))
}

// sleep waits for d and reports whether it was not interrupted by ctx.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *server) progress(token json.RawMessage, progress, total int) {
	params, err := encode(struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Progress      int             `json:"progress"`
		Total         int             `json:"total"`
	}{token, progress, total})
	if err == nil {
		err = writeNotification(s.out, notifProgress, params)
	}
	if err != nil && !errors.Is(err, errOutputClosed) {
		s.log.Printf("writing progress: %v", err)
	}
}

// crash ends the process with status 3 without answering.
func crash(_ context.Context, s *server, _ *toolCall) (json.RawMessage, *rpcError) {
	s.log.Print("crashing now")
	s.out.close()
	s.exit(&exitError{code: 3, reason: "crash tool called"})
	return nil, nil
}

// big returns one text of exactly the requested number of 'x' characters.
// The result is built directly, as it may be large.
func big(_ context.Context, _ *server, call *toolCall) (json.RawMessage, *rpcError) {
	var args struct {
		Bytes *int64 `json:"bytes"`
	}
	if err := decodeArguments(call, &args); err != nil {
		return errorResult(err.Error())
	}
	n := int64(defaultBigBytes)
	if args.Bytes != nil {
		n = *args.Bytes
	}
	if n < 0 || n > maxBigBytes {
		return errorResult(fmt.Sprintf("invalid arguments: bytes must be between 0 and %d", maxBigBytes))
	}
	const head, tail = `{"content":[{"type":"text","text":"`, `"}]}`
	b := make([]byte, len(head)+int(n)+len(tail))
	copy(b, head)
	x := b[len(head) : len(head)+int(n)]
	for i := range x {
		x[i] = 'x'
	}
	copy(b[len(head)+int(n):], tail)
	return b, nil
}

func fail(context.Context, *server, *toolCall) (json.RawMessage, *rpcError) {
	return errorResult("tool failed on purpose")
}

// garbage writes a line that is not JSON and a truncated message before
// answering normally.
func garbage(_ context.Context, s *server, _ *toolCall) (json.RawMessage, *rpcError) {
	for _, line := range []string{`this is not json`, `{"jsonrpc":"2.0","id":`} {
		if err := s.out.writeLine([]byte(line)); err != nil && !errors.Is(err, errOutputClosed) {
			s.log.Printf("writing garbage: %v", err)
		}
	}
	return textResult("after garbage")
}

// env returns the value of an environment variable; an unset one is a tool
// error, so that unset and empty can be told apart.
func env(_ context.Context, _ *server, call *toolCall) (json.RawMessage, *rpcError) {
	var args struct {
		Name string `json:"name"`
	}
	if err := decodeArguments(call, &args); err != nil {
		return errorResult(err.Error())
	}
	if args.Name == "" {
		return errorResult("invalid arguments: name is required")
	}
	v, ok := os.LookupEnv(args.Name)
	if !ok {
		return errorResult("environment variable " + args.Name + " is not set")
	}
	return textResult(v)
}

// whoami reports the identity a call carried: "pid=N env=$WHOAMI sub=S", S being the
// subjects of the bearer tokens the HTTP session's requests carried, comma-separated
// (more than one means a session carried two people).
func whoami(_ context.Context, s *server, _ *toolCall) (json.RawMessage, *rpcError) {
	var subs []string
	if s.subjects != nil {
		subs = s.subjects()
	}
	return textResult(fmt.Sprintf("pid=%d env=%s sub=%s", os.Getpid(), os.Getenv("WHOAMI"), strings.Join(subs, ",")))
}

func cwd(context.Context, *server, *toolCall) (json.RawMessage, *rpcError) {
	dir, err := os.Getwd()
	if err != nil {
		return errorResult("getting working directory: " + err.Error())
	}
	return textResult(dir)
}
