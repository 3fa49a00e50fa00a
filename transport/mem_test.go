package transport

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// readLine is ReadLine failing the test on an error.
func readLine(t *testing.T, l *MemLink) string {
	t.Helper()
	line, err := l.ReadLine()
	if err != nil {
		t.Fatalf("ReadLine: %v", err)
	}
	return string(line)
}

// serverRead is Read failing the test on an error.
func serverRead(t *testing.T, s *MemServer) *jsonrpc.Message {
	t.Helper()
	m, err := s.Read()
	if err != nil {
		t.Fatalf("server Read: %v", err)
	}
	return m
}

// TestMemPipeConversation: what one end writes the other reads, in order, one message
// per line, with the exact bytes; Buffered counts the lines waiting for the proxy.
func TestMemPipeConversation(t *testing.T) {
	link, srv := Pipe(0)
	defer link.Stop(0)
	if err := link.Write(jsonrpc.NewRequest(jsonrpc.StringID("a"), "tools/call", []byte(`{"name":"x"}`))); err != nil {
		t.Fatal(err)
	}
	if err := link.Write(jsonrpc.NewNotification("notifications/initialized", nil)); err != nil {
		t.Fatal(err)
	}
	if m := serverRead(t, srv); m.ID.Raw() != `"a"` || m.Method != "tools/call" || string(m.Params) != `{"name":"x"}` {
		t.Errorf("server read %s", m)
	}
	if m := serverRead(t, srv); !m.IsNotification() || m.Method != "notifications/initialized" {
		t.Errorf("server read %s", m)
	}

	if link.Buffered() != 0 {
		t.Errorf("Buffered = %d before the server wrote", link.Buffered())
	}
	if err := srv.Write(jsonrpc.NewResult(jsonrpc.StringID("a"), []byte(`{"ok":true}`))); err != nil {
		t.Fatal(err)
	}
	// Raw bytes are framed as on a pipe: split at newlines, \r trimmed, blank lines dropped.
	if err := srv.WriteLine([]byte("{\"jsonrpc\":\"2.0\",\"method\":\"one\"}\r\n\n  \n{\"jsonrpc\":\"2.0\",\"method\":\"two\"}")); err != nil {
		t.Fatal(err)
	}
	if n := link.Buffered(); n != 3 {
		t.Errorf("Buffered = %d; want 3 lines", n)
	}
	for _, want := range []string{
		`{"jsonrpc":"2.0","id":"a","result":{"ok":true}}`,
		`{"jsonrpc":"2.0","method":"one"}`,
		`{"jsonrpc":"2.0","method":"two"}`,
	} {
		if got := readLine(t, link); got != want {
			t.Errorf("ReadLine = %s; want %s", got, want)
		}
	}
	if link.Buffered() != 0 {
		t.Errorf("Buffered = %d after reading everything", link.Buffered())
	}
	if link.Describe() == "" {
		t.Error("no description")
	}
}

// TestMemPipeReadLineWaits: ReadLine blocks until the server writes, or the link dies.
func TestMemPipeReadLineWaits(t *testing.T) {
	link, srv := Pipe(0)
	got := make(chan string)
	go func() {
		line, err := link.ReadLine()
		got <- fmt.Sprintf("%s %v", line, err)
	}()
	srv.Write(jsonrpc.NewNotification("late", nil))
	if g := <-got; g != `{"jsonrpc":"2.0","method":"late"} <nil>` {
		t.Errorf("ReadLine got %s", g)
	}
	go func() {
		_, err := link.ReadLine()
		got <- fmt.Sprint(err)
	}()
	srv.Close()
	if g := <-got; g != "EOF" {
		t.Errorf("ReadLine on a link that died got %s; want EOF", g)
	}
}

// TestMemPipeServerDies: a crash (Fail) or an exit (Close) ends the link: Done closes,
// ExitErr says why, what the server wrote before is still read, then EOF; writes fail on
// both ends.
func TestMemPipeServerDies(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name string
		end  func(*MemServer)
		want error
	}{
		{"crash", func(s *MemServer) { s.Fail(boom) }, boom},
		{"exit", func(s *MemServer) { s.Close() }, nil},
		{"fail nil is an exit", func(s *MemServer) { s.Fail(nil) }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			link, srv := Pipe(0)
			srv.Write(jsonrpc.NewNotification("last", nil))
			srv.Write(jsonrpc.NewNotification("words", nil))
			tt.end(srv)
			tt.end(srv) // a second end changes nothing
			srv.Fail(errors.New("ignored: already dead"))
			select {
			case <-link.Done():
			default:
				t.Fatal("Done is not closed")
			}
			select {
			case <-srv.Done():
			default:
				t.Fatal("the server's Done is not closed")
			}
			if err := link.ExitErr(); err != tt.want {
				t.Errorf("ExitErr = %v; want %v", err, tt.want)
			}
			if got := readLine(t, link); got != `{"jsonrpc":"2.0","method":"last"}` {
				t.Errorf("first line after death: %s", got)
			}
			if got := readLine(t, link); got != `{"jsonrpc":"2.0","method":"words"}` {
				t.Errorf("second line after death: %s", got)
			}
			if _, err := link.ReadLine(); err != io.EOF {
				t.Errorf("ReadLine after the last line: %v; want EOF", err)
			}
			if err := link.Write(jsonrpc.NewNotification("x", nil)); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("proxy Write on a dead link: %v", err)
			}
			if err := srv.Write(jsonrpc.NewNotification("x", nil)); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("server Write on a dead link: %v", err)
			}
			if _, err := srv.Read(); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("server Read on a dead link: %v", err)
			}
			if _, ok := link.Unread(); ok {
				t.Error("Unread on a dead link claims to know")
			}
			if err := link.Stop(time.Hour); err != nil { // at once: the link is dead
				t.Errorf("Stop after death: %v", err)
			}
		})
	}
}

// TestMemPipeStopGraceful: Stop closes the server's input; a server that exits at EOF
// reads everything written before, and Stop returns as soon as it has exited.
func TestMemPipeStopGraceful(t *testing.T) {
	link, srv := Pipe(0)
	var got []string
	served := make(chan error, 1)
	go func() {
		for {
			m, err := srv.Read()
			if err != nil {
				served <- err
				srv.Close()
				return
			}
			got = append(got, m.Method)
		}
	}()
	link.Write(jsonrpc.NewNotification("a", nil))
	link.Write(jsonrpc.NewNotification("b", nil))
	if err := link.Stop(time.Hour); err != nil { // the server exits long before
		t.Fatal(err)
	}
	if err := <-served; err != io.EOF {
		t.Errorf("the server's Read ended with %v; want EOF", err)
	}
	if strings.Join(got, ",") != "a,b" {
		t.Errorf("the server read %q before EOF", got)
	}
	if err := link.ExitErr(); err != nil {
		t.Errorf("ExitErr after a clean exit: %v", err)
	}
	if err := link.Write(jsonrpc.NewNotification("c", nil)); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Write after Stop: %v", err)
	}
	if err := link.Stop(time.Hour); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestMemPipeStopKills: a server that does not exit when its input closes is ended after
// the grace period; concurrent Stops all return once it is dead.
func TestMemPipeStopKills(t *testing.T) {
	link, srv := Pipe(0)
	link.Write(jsonrpc.NewNotification("unread", nil))
	const grace = 20 * time.Millisecond
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := link.Stop(grace); err != nil {
				t.Errorf("Stop: %v", err)
			}
			select {
			case <-link.Done():
			default:
				t.Error("Stop returned before the link died")
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d < grace {
		t.Errorf("Stop killed after %s; want the grace period %s first", d, grace)
	}
	if err := link.ExitErr(); err != errKilled {
		t.Errorf("ExitErr = %v; want %v", err, errKilled)
	}
	if _, err := srv.Read(); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("the killed server's Read: %v", err)
	}
}

// TestMemPipeServerWritesAfterStop: after Stop closed its input, a server still says its
// last words before it exits, and the proxy reads them.
func TestMemPipeServerWritesAfterStop(t *testing.T) {
	link, srv := Pipe(0)
	go func() {
		if _, err := srv.Read(); err == io.EOF {
			srv.Write(jsonrpc.NewNotification("bye", nil))
		}
		srv.Close()
	}()
	if err := link.Stop(time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := readLine(t, link); got != `{"jsonrpc":"2.0","method":"bye"}` {
		t.Errorf("read %s", got)
	}
}

// TestMemPipeUnread: Unread counts the bytes the server has not read, as a pipe's
// FIONREAD does, and Cork holds writes back until Uncork.
func TestMemPipeUnread(t *testing.T) {
	link, srv := Pipe(0)
	defer link.Stop(0)
	if n, ok := link.Unread(); n != 0 || !ok {
		t.Fatalf("Unread before any write = %d, %v", n, ok)
	}
	m := jsonrpc.NewNotification("first", nil)
	enc, _ := m.Encode()
	link.Cork()
	link.Write(m)
	if n, ok := link.Unread(); n != 0 || !ok {
		t.Errorf("Unread of a corked write = %d, %v; want 0 (not sent yet)", n, ok)
	}
	if err := link.Uncork(); err != nil {
		t.Fatal(err)
	}
	if n, ok := link.Unread(); n != len(enc)+1 || !ok {
		t.Errorf("Unread = %d, %v; want %d, true", n, ok, len(enc)+1)
	}
	serverRead(t, srv)
	if n, ok := link.Unread(); n != 0 || !ok {
		t.Errorf("Unread after the server read = %d, %v", n, ok)
	}
	go srv.Close()
	link.Stop(time.Hour)
	if _, ok := link.Unread(); ok {
		t.Error("Unread after Stop claims to know")
	}
}

// TestMemPipeTooLarge: a line over the limit is reported with its size and head, and
// reading goes on with the next line.
func TestMemPipeTooLarge(t *testing.T) {
	link, srv := Pipe(40)
	defer link.Stop(0)
	big := `{"jsonrpc":"2.0","id":7,"result":{"text":"` + strings.Repeat("x", 100) + `"}}`
	srv.WriteLine([]byte(big))
	srv.Write(jsonrpc.NewNotification("small", nil))
	_, err := link.ReadLine()
	var tl *jsonrpc.TooLargeError
	if !errors.Is(err, jsonrpc.ErrMessageTooLarge) || !errors.As(err, &tl) {
		t.Fatalf("ReadLine of an oversized line: %v", err)
	}
	if tl.Size != len(big) || tl.Limit != 40 || !strings.HasPrefix(string(tl.Head), `{"jsonrpc":"2.0","id":7`) {
		t.Errorf("TooLargeError %+v", tl)
	}
	if got := readLine(t, link); got != `{"jsonrpc":"2.0","method":"small"}` {
		t.Errorf("after the oversized line: %s", got)
	}
}

// TestMemPipeConcurrentWriters: lines from concurrent writers on either end never
// interleave, and every one arrives.
func TestMemPipeConcurrentWriters(t *testing.T) {
	link, srv := Pipe(0)
	defer link.Stop(0)
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := link.Write(jsonrpc.NewNotification(fmt.Sprintf("p%d.%d", w, i), nil)); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range each {
				if err := srv.Write(jsonrpc.NewNotification(fmt.Sprintf("s%d.%d", w, i), nil)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	seen := map[string]bool{}
	for range writers * each {
		seen[serverRead(t, srv).Method] = true
		m, err := jsonrpc.Decode([]byte(readLine(t, link)))
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Method] = true
	}
	wg.Wait()
	if len(seen) != 2*writers*each {
		t.Errorf("%d distinct messages arrived; want %d", len(seen), 2*writers*each)
	}
}
