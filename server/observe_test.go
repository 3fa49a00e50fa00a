package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/principal"
	"github.com/mcp-proxy/mcp-proxy/router"
)

type sessionRecorder chan SessionEvent

func (r sessionRecorder) SessionEvent(e SessionEvent) { r <- e }

func (r sessionRecorder) next(t *testing.T) SessionEvent {
	t.Helper()
	select {
	case e := <-r:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no session event within 10s")
	}
	return SessionEvent{}
}

const observeInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"obs-client","version":"1"}}}`

// TestSessionObserver: a session is reported opened once initialize is answered (with
// transport, version, client and principal) and closed when it ends, on stdio and over
// Streamable HTTP (DELETE).
func TestSessionObserver(t *testing.T) {
	log := zerolog.Nop()
	r := router.New(router.Options{}, log)
	rec := make(sessionRecorder, 16)
	srv := New(r, Options{Name: "test", Observer: rec, ReadyTimeout: time.Second,
		Principal: &principal.Principal{Name: "me"}}, log)
	ctx := context.Background()

	t.Run("stdio", func(t *testing.T) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		served := make(chan error, 1)
		go func() { served <- srv.ServeStream(ctx, inR, outW) }()
		io.WriteString(inW, observeInit+"\n")
		if _, err := bufio.NewReader(outR).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		e := rec.next(t)
		if e.Kind != SessionOpened || e.Transport != TransportStdio || e.Version != "2025-06-18" || e.Client != "obs-client" || e.Principal != "me" {
			t.Fatalf("opened: %+v", e)
		}
		inW.Close()
		go io.Copy(io.Discard, outR)
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		if e := rec.next(t); e.Kind != SessionClosed || e.Transport != TransportStdio || e.Duration <= 0 {
			t.Fatalf("closed: %+v", e)
		}
	})

	t.Run("streamable http", func(t *testing.T) {
		h := srv.NewHTTPHandler(ctx, HTTPOptions{Path: "/mcp", Loopback: true})
		defer h.Close()
		ts := httptest.NewServer(h)
		defer ts.Close()
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(observeInit))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		e := rec.next(t)
		if e.Kind != SessionOpened || e.Transport != TransportStreamableHTTP || e.ID != sid || sid == "" {
			t.Fatalf("opened: %+v (session %q)", e, sid)
		}
		del, _ := http.NewRequest(http.MethodDelete, ts.URL+"/mcp", nil)
		del.Header.Set("Mcp-Session-Id", sid)
		del.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if resp, err := http.DefaultClient.Do(del); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		if e := rec.next(t); e.Kind != SessionClosed || e.ID != sid {
			t.Fatalf("closed: %+v", e)
		}
	})
}
