package server

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/router"
)

// TestRefusalsReachTheHook: what a stdio session refuses before routing is told to the
// router's refusal hook with the methods it names (a line over the size limit by its
// head, a batch element by itself); what it serves is not.
func TestRefusalsReachTheHook(t *testing.T) {
	r := newMemRouter(t, newMemUpstream("a", "echo"))
	var mu sync.Mutex
	var got []string
	r.UseRefusals(func(_ context.Context, ref *router.Refusal) {
		mu.Lock()
		got = append(got, strings.Join(ref.Methods, "+")+": "+ref.Reason+" args="+string(ref.Arguments))
		mu.Unlock()
	})
	c := dialStdio(t, New(r, Options{MaxMessage: 4096}, testLog(t)))
	if m := c.initialize("2025-03-26", `{}`); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","arguments":{"pad":"` + strings.Repeat("x", 5000) + `"}}}`)
	if m := c.next(); m.code() == 0 {
		t.Errorf("a line over the limit was served: %+v", m)
	}
	c.send(`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__echo","name":"b","arguments":{"k":1}}},` +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a__echo","arguments":{}}}]`)
	if l := c.nextLine(); !strings.HasPrefix(l, "[") {
		t.Errorf("the batch answer: %s", l)
	}
	if m := c.call(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a__echo","arguments":{}}}`); m.Error != nil {
		t.Errorf("a served call: %+v", m.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"tools/call: Invalid Request: message of 5097 bytes exceeds the limit of 4096 bytes args=",
		`tools/call: Invalid params: duplicate member "name" in params (member names must be unique, compared after unescaping and without case) args={"k":1}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("refusals:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
