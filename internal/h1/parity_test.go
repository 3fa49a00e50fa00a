package h1

// Checks written during the review for suspicions that turned out fine; they pass.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The watch reads one byte of the next request while the handler still runs; that byte
// must reach the next request, on the fast path and when handed to net/http.
func TestReadAheadByteKept(t *testing.T) {
	for _, next := range []string{
		"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyz",
		"PUT /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyz", // handed over
		"P", // the next head arrives one byte, then the rest
	} {
		sent := make(chan struct{})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/a" {
				w.Header().Set("Content-Length", "1")
				io.WriteString(w, "a")
				w.(http.Flusher).Flush()
				<-sent
				time.Sleep(50 * time.Millisecond) // the watch reads the first byte now
				return
			}
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, r.Method+string(b))
		})
		_, addr := start(t, h, func(s *Server) { s.WatchDelay = time.Millisecond })
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		io.WriteString(c, next)
		if next == "P" {
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, "OST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyz")
			next = "POST"
		}
		close(sent)
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if want := strings.Fields(next)[0] + "xyz"; string(b) != want {
			t.Errorf("next request after a read-ahead: %q, want %q", b, want)
		}
		c.Close()
	}
}

// Framing of the corner cases: Flush before any write, 204/304, WriteHeader after Write,
// an empty body.
func TestFramingCorners(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flush-empty":
			w.(http.Flusher).Flush()
		case "/204":
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(204)
			if _, err := io.WriteString(w, "hello"); err != http.ErrBodyNotAllowed {
				panic(err)
			}
		case "/304":
			w.WriteHeader(304)
			w.(http.Flusher).Flush()
		case "/late":
			io.WriteString(w, "x")
			w.WriteHeader(500)
		case "/empty":
		}
	})
	_, addr := start(t, h)
	raw := ""
	for _, p := range []string{"/flush-empty", "/204", "/304", "/late", "/empty"} {
		raw += "GET " + p + " HTTP/1.1\r\nHost: h\r\n\r\n"
	}
	resps, bodies := exchange(t, addr, raw, 5)
	want := []struct {
		status int
		body   string
	}{{200, ""}, {204, ""}, {304, ""}, {200, "x"}, {200, ""}}
	for i, w := range want {
		if resps[i].StatusCode != w.status || bodies[i] != w.body {
			t.Errorf("response %d: %d %q", i, resps[i].StatusCode, bodies[i])
		}
	}
	if resps[0].TransferEncoding == nil || resps[4].ContentLength != 0 {
		t.Errorf("framing: flush-empty TE %v, empty CL %d", resps[0].TransferEncoding, resps[4].ContentLength)
	}
}
