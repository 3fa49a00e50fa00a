// Command authorplugin is a plugin written as an outside author writes one: against the
// public SDK only (plugins/sdk), logging every way an author would (the SDK's logger
// made before and after Serve, hclog in its text and JSON formats, the standard log
// package, log/slog, plain writes to stderr and stdout), and recording its pid so that a
// test can find its process. The e2e tests build it with go build.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-proxy/mcp-proxy/plugins/sdk"
)

type config struct {
	Tag      string `json:"tag"`        // appended to text results
	PidsFile string `json:"pids_file"`  // Configure appends "pid tag" here
	Calls    string `json:"calls_file"` // each before hook appends "pid name" here
	Logs     bool   `json:"logs"`       // log a line every way in Configure and in each before hook
}

type plugin struct {
	sdk.Base
	cfg config
}

// early is the SDK's logger made before Serve (a package-level logger, as most authors
// keep one).
var early = sdk.Logger()

func (p *plugin) Describe() sdk.Description {
	return sdk.Description{Name: "authorplugin", Version: "1.0.0", Hooks: []sdk.Hook{sdk.HookBefore, sdk.HookAfter}, Config: []sdk.Attribute{
		{Name: "tag", Type: "string"},
		{Name: "pids_file", Type: "string"},
		{Name: "logs", Type: "bool"},
		{Name: "calls_file", Type: "string"},
	}}
}

// logEvery logs one line each way, each naming where it was logged (at) and the level it
// should arrive at in the proxy's log.
func logEvery(at string) {
	early.Info("early-sdk-info "+at, "at", at)
	early.Warn("early-sdk-warn " + at)
	l := sdk.Logger() // made after Serve started
	l.Debug("late-sdk-debug "+at, "n", 1)
	l.Info("late-sdk-info "+at, "at", at)
	l.Error("late-sdk-error " + at)
	hclog.New(&hclog.LoggerOptions{Name: "mine"}).Info("hclog-text-info " + at)
	hclog.New(&hclog.LoggerOptions{Name: "mine", Output: os.Stderr, Level: hclog.Trace}).Warn("hclog-text-stderr-warn " + at)
	hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true}).Error("hclog-json-error "+at, "at", at)
	log.Printf("stdlog-plain %s", at)
	slog.New(slog.NewJSONHandler(os.Stderr, nil)).Warn("slog-json-warn "+at, "at", at)
	slog.New(slog.NewTextHandler(os.Stderr, nil)).Error("slog-text-error " + at)
	fmt.Fprintln(os.Stderr, "plain-stderr "+at)
	fmt.Fprintln(os.Stderr, "[WARN] prefixed-stderr-warn "+at)
	fmt.Println("plain-stdout " + at)
}

func (p *plugin) Configure(_ context.Context, _ string, raw json.RawMessage) error {
	if err := sdk.Decode(raw, &p.cfg); err != nil {
		return err
	}
	if err := appendLine(p.cfg.PidsFile, fmt.Sprintf("%d %s", os.Getpid(), p.cfg.Tag)); err != nil {
		return err
	}
	if p.cfg.Logs {
		logEvery("configure")
	}
	return nil
}

func (p *plugin) Before(_ context.Context, c *sdk.Call) (*sdk.Verdict, error) {
	if err := appendLine(p.cfg.Calls, fmt.Sprintf("%d %s", os.Getpid(), c.Name)); err != nil {
		return nil, err
	}
	if p.cfg.Logs {
		logEvery("before")
	}
	return nil, nil
}

func (p *plugin) After(_ context.Context, _ *sdk.Call, o *sdk.Outcome) (*sdk.Replacement, error) {
	if p.cfg.Tag == "" || o.Error != nil {
		return nil, nil
	}
	var res map[string]any
	if err := json.Unmarshal(o.Result, &res); err != nil {
		return nil, err
	}
	content, _ := res["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok && m["type"] == "text" {
			m["text"] = fmt.Sprint(m["text"]) + p.cfg.Tag
		}
	}
	out, err := json.Marshal(map[string]any{"content": content})
	if err != nil {
		return nil, err
	}
	return &sdk.Replacement{Result: out}, nil
}

// appendLine appends a line to a file; nothing when path is "".
func appendLine(path, line string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func main() {
	early.Info("early-sdk-info main", "at", "main")
	fmt.Fprintln(os.Stderr, "plain-stderr main")
	sdk.Serve(&plugin{})
}
