package h1

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Stress under -race: handlers that answer from another goroutine (Flush there, as the
// proxy's upstream reader does) while the handler waits, streams, slow answers (timer
// watch), pipelined requests, mixed fast/handed-off requests, clients that vanish, and
// a Shutdown/Close at the end. It checks that every answer a client reads is the one to
// its own request (no desync, no lost read-ahead byte).
func TestStressConcurrentWritersAndWatch(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("X-Id")
		answer := fmt.Sprintf("%s|%s|%s", r.Method, id, body)
		switch r.URL.Path {
		case "/async": // another goroutine writes the answer and flushes; the handler waits
			var mu sync.Mutex
			done := make(chan struct{})
			go func() {
				time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
				mu.Lock()
				w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
				w.WriteHeader(200)
				io.WriteString(w, answer)
				w.(http.Flusher).Flush()
				mu.Unlock()
				close(done)
			}()
			select {
			case <-done:
			case <-r.Context().Done():
				<-done // the writer must be done before the handler returns
			}
		case "/stream":
			io.WriteString(w, answer[:1])
			w.(http.Flusher).Flush()
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
			io.WriteString(w, answer[1:])
		case "/slow":
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
			io.WriteString(w, answer)
		default:
			io.WriteString(w, answer)
		}
	})
	s, addr := start(t, h, func(s *Server) { s.WatchDelay = 2 * time.Millisecond })
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 15 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					errs <- err
					return
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				n := 1 + rand.IntN(5)
				var raw strings.Builder
				var want []string
				for i := range n {
					id := fmt.Sprintf("%d-%d-%d", g, round, i)
					path := []string{"/async", "/stream", "/slow", "/fast"}[rand.IntN(4)]
					method := []string{"GET", "POST", "DELETE", "PUT"}[rand.IntN(4)] // PUT goes to net/http
					body := ""
					if method == "POST" || method == "PUT" {
						body = strings.Repeat("b", rand.IntN(3000))
					}
					fmt.Fprintf(&raw, "%s %s HTTP/1.1\r\nHost: h\r\nX-Id: %s\r\nContent-Length: %d\r\n\r\n%s", method, path, id, len(body), body)
					want = append(want, fmt.Sprintf("%s|%s|%s", method, id, body))
				}
				vanish := rand.IntN(6) == 0
				pipelined := rand.IntN(2) == 0
				br := bufio.NewReader(c)
				if pipelined {
					io.WriteString(c, raw.String())
				}
				all := raw.String()
				for i := range n {
					if !pipelined {
						// send request i alone
						start := 0
						for j := 0; j < i; j++ {
							start += len(reqOf(all, start))
						}
						io.WriteString(c, reqOf(all, start))
					}
					if vanish && i == n/2 {
						time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
						break
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						errs <- fmt.Errorf("conn %d-%d resp %d/%d pipelined=%v: %v", g, round, i, n, pipelined, err)
						break
					}
					b, err := io.ReadAll(resp.Body)
					if err != nil || string(b) != want[i] {
						errs <- fmt.Errorf("conn %d-%d resp %d: %.60q %v, want %.60q", g, round, i, b, err, want[i])
						break
					}
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// reqOf returns the request starting at off in all (head plus its Content-Length body).
func reqOf(all string, off int) string {
	rest := all[off:]
	i := strings.Index(rest, "\r\n\r\n") + 4
	var n int
	for _, line := range strings.Split(rest[:i], "\r\n") {
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			fmt.Sscan(v, &n)
		}
	}
	return rest[:i+n]
}
