//go:build linux

package transport

import (
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
)

// TestProcessUnread: what the child has read is not counted, what it has not is.
func TestProcessUnread(t *testing.T) {
	// The shell reads one line, echoes it, then sleeps without reading.
	p, err := StartProcess(ProcessSpec{Command: []string{"sh", "-c", `read -r x; echo "$x"; exec sleep 60`}, MaxMessage: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(100 * time.Millisecond)
	if n, ok := p.Unread(); !ok || n != 0 {
		t.Fatalf("before any write: Unread = %d, %v; want 0, true", n, ok)
	}
	first := jsonrpc.NewNotification("first", nil)
	if err := p.Write(first); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadLine(); err != nil { // the echo: the line was read
		t.Fatal(err)
	}
	if n, ok := p.Unread(); !ok || n != 0 {
		t.Errorf("after the child read everything: Unread = %d, %v; want 0, true", n, ok)
	}
	second := jsonrpc.NewNotification("second", nil)
	if err := p.Write(second); err != nil {
		t.Fatal(err)
	}
	enc, err := second.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := len(enc) + 1 // and its newline
	if n, ok := p.Unread(); !ok || n != want {
		t.Errorf("after a write nobody reads: Unread = %d, %v; want %d, true", n, ok, want)
	}
	if err := p.Stop(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Unread(); ok {
		t.Errorf("Unread after Stop claims to know")
	}
}
