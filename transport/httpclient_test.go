package transport

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// TestHTTPLinkResumesAnswerStream: the server closes a call's event stream before the
// response, having sent an event id and a retry delay (SEP-1699); the link resumes it
// with a GET carrying Last-Event-ID and gets the response there.
func TestHTTPLinkResumesAnswerStream(t *testing.T) {
	var gets atomic.Int32
	var lastEventID atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		switch r.Method {
		case http.MethodPost:
			io.WriteString(w, "id: s1-0\ndata: \n\n")
			io.WriteString(w, "id: s1-1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
			io.WriteString(w, "retry: 20\n\n") // close the connection, not the stream
		case http.MethodGet:
			if r.Header.Get("Last-Event-ID") == "" {
				w.WriteHeader(http.StatusMethodNotAllowed) // no standalone stream
				return
			}
			gets.Add(1)
			lastEventID.Store(r.Header.Get("Last-Event-ID"))
			io.WriteString(w, "id: s1-2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"ok\":true}}\n\n")
		}
	}))
	defer srv.Close()
	l := DialHTTP(HTTPSpec{URL: srv.URL})
	defer l.Stop(time.Second)
	if err := l.Write(jsonrpc.NewRequest(jsonrpc.IntID(7), "tools/call", []byte(`{"name":"x"}`))); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		line, err := readLineTimeout(l, 5*time.Second)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, string(line))
	}
	if !strings.Contains(got[0], "notifications/progress") || !strings.Contains(got[1], `"id":7`) {
		t.Errorf("messages %v", got)
	}
	if gets.Load() != 1 || lastEventID.Load() != "s1-1" {
		t.Errorf("resumed %d times from %v, want once from s1-1", gets.Load(), lastEventID.Load())
	}
}

// TestHTTPLinkStreamEndsWithoutAnswer: a stream that ends with no way to resume fails
// its request at once (reported as the link's failure, not as a response from the
// server) instead of leaving it to time out; what the stream did carry is delivered.
func TestHTTPLinkStreamEndsWithoutAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
	}))
	defer srv.Close()
	l := DialHTTP(HTTPSpec{URL: srv.URL})
	defer l.Stop(time.Second)
	failed := watchFailures(l)
	if err := l.Write(jsonrpc.NewRequest(jsonrpc.StringID("q"), "tools/call", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	line, err := readLineTimeout(l, 5*time.Second)
	if err != nil || !strings.Contains(string(line), "notifications/message") {
		t.Fatalf("the stream's notification: %s %v", line, err)
	}
	f := <-failed
	if f.id.Raw() != `"q"` || !strings.Contains(f.err.Error(), "ended before the response") {
		t.Errorf("failure %v %v", f.id, f.err)
	}
}

// TestHTTPLinkStreamCutMidEvent: the connection carrying a call's event stream breaks
// in the middle of the response's event (no blank line, no last chunk). The part that
// came is not handed on as a message (it used to be: a cut-off JSON line, whose id even
// marked the call answered, so that it then waited for its timeout); the stream is
// resumed after the last event received whole, or, when it cannot be, the call fails at
// once with the read error.
func TestHTTPLinkStreamCutMidEvent(t *testing.T) {
	const response = `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}}`
	for _, resumable := range []bool{true, false} {
		t.Run(fmt.Sprintf("resumable=%v", resumable), func(t *testing.T) {
			var lastEventID atomic.Value
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					if !resumable || r.Header.Get("Last-Event-ID") == "" {
						w.WriteHeader(http.StatusMethodNotAllowed)
						return
					}
					lastEventID.Store(r.Header.Get("Last-Event-ID"))
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, "id: c-1\nevent: message\ndata: "+response+"\n\n")
					return
				}
				io.Copy(io.Discard, r.Body)
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close() // the cut: no rest of the event, no last chunk
				events := "id: c-0\ndata: \n\n" + "id: c-1\nevent: message\ndata: " + response[:len(response)/2]
				fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(events), events)
				buf.Flush()
			}))
			defer srv.Close()
			l := DialHTTP(HTTPSpec{URL: srv.URL})
			defer l.Stop(time.Second)
			failed := watchFailures(l)
			if err := l.Write(jsonrpc.NewRequest(jsonrpc.IntID(7), "tools/list", nil)); err != nil {
				t.Fatal(err)
			}
			if !resumable {
				select {
				case f := <-failed:
					if f.id.Raw() != "7" || !strings.Contains(f.err.Error(), "ended before the response") || !errors.Is(f.err, io.ErrUnexpectedEOF) {
						t.Errorf("failure %v %v, want the stream's end and why", f.id, f.err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the call did not fail: it would wait for its timeout")
				}
				if n := l.Buffered(); n != 0 {
					line, _ := l.ReadLine()
					t.Errorf("%d messages queued besides the failure, first %s", n, line)
				}
				return
			}
			line, err := readLineTimeout(l, 5*time.Second)
			if err != nil || string(line) != response {
				t.Fatalf("got %q (%v), want the whole response", line, err)
			}
			if got := lastEventID.Load(); got != "c-0" {
				t.Errorf("resumed from %v, want c-0 (c-1 never came whole)", got)
			}
			select {
			case f := <-failed:
				t.Errorf("the call failed too: %v", f.err)
			default:
			}
		})
	}
}

// TestHTTPLinkFailuresAreNotResponses: an HTTP error without a JSON-RPC body and an
// oversized answer fail their request through RequestFailer, with nothing queued that
// could pass for the upstream's own error; a JSON-RPC error body is the server's answer.
func TestHTTPLinkFailuresAreNotResponses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(b), `"id":"boom"`):
			http.Error(w, "internal error", http.StatusInternalServerError)
		case strings.Contains(string(b), `"id":"big"`):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":"big","result":{"x":"`+strings.Repeat("x", 4096)+`"}}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad"}}`)
		}
	}))
	defer srv.Close()
	l := DialHTTP(HTTPSpec{URL: srv.URL, MaxMessage: 1024})
	defer l.Stop(time.Second)
	failed := watchFailures(l)
	for _, id := range []string{"boom", "big"} {
		if err := l.Write(jsonrpc.NewRequest(jsonrpc.StringID(id), "tools/call", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
		f := <-failed
		if f.id.Raw() != `"`+id+`"` {
			t.Fatalf("failure for %v, want %s", f.id, id)
		}
		if big := errors.Is(f.err, jsonrpc.ErrMessageTooLarge); big != (id == "big") {
			t.Errorf("%s: %v (too large: %v)", id, f.err, big)
		}
	}
	if err := l.Write(jsonrpc.NewRequest(jsonrpc.StringID("rpc"), "tools/call", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	line, err := readLineTimeout(l, 5*time.Second)
	if err != nil || !strings.Contains(string(line), `"id":"rpc"`) || !strings.Contains(string(line), "-32602") {
		t.Fatalf("the server's JSON-RPC error is its answer: %s %v", line, err)
	}
}

type linkFailure struct {
	id  jsonrpc.ID
	err error
}

func watchFailures(l RequestFailer) <-chan linkFailure {
	ch := make(chan linkFailure, 8)
	l.OnRequestFailure(func(id jsonrpc.ID, err error) { ch <- linkFailure{id, err} })
	return ch
}

func readLineTimeout(l *HTTPLink, d time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := l.ReadLine()
		ch <- res{append([]byte(nil), b...), err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(d):
		return nil, fmt.Errorf("no message within %s", d)
	}
}

// TestTransportFor: plain http goes to the lean client, https (HTTP/2, TLS) and
// anything unparsable to net/http.
func TestTransportFor(t *testing.T) {
	for url, want := range map[string]http.RoundTripper{
		"http://127.0.0.1:8080/mcp": leanTransport,
		"https://example.com/mcp":   sharedTransport,
		"http:///nohost":            sharedTransport,
		"::bad":                     sharedTransport,
	} {
		if got := transportFor(url); got != want {
			t.Errorf("%s: got %T %p", url, got, got)
		}
	}
}
