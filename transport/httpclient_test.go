package transport

import (
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
// its request at once instead of leaving it to time out.
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
	if err := l.Write(jsonrpc.NewRequest(jsonrpc.StringID("q"), "tools/call", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	var last string
	for i := 0; i < 2; i++ {
		line, err := readLineTimeout(l, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		last = string(line)
	}
	if !strings.Contains(last, `"id":"q"`) || !strings.Contains(last, "ended before the response") {
		t.Errorf("last message %s", last)
	}
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
