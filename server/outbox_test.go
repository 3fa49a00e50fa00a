package server

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// TestOutboxStuckClient: writes to a client that reads nothing return at once until more
// than the limit is queued; then the outbox calls stuck once, drops its queue and fails
// every later write. A single message larger than the limit is taken when nothing waits.
func TestOutboxStuckClient(t *testing.T) {
	pr, pw := io.Pipe() // nobody reads pr until the end
	var stuck atomic.Int32
	o := newOutbox(pw, 1000, func() { stuck.Add(1) })
	if _, err := o.Write(bytes.Repeat([]byte("x"), 5000)); err != nil {
		t.Fatalf("one large message to an empty outbox: %v", err)
	}
	var err error
	n := 0
	for ; err == nil && n < 100; n++ {
		_, err = o.Write(bytes.Repeat([]byte("y"), 100))
	}
	if !errors.Is(err, errClientStuck) || stuck.Load() != 1 {
		t.Fatalf("after %d writes: %v, stuck called %d times", n, err, stuck.Load())
	}
	if _, err := o.Write([]byte("z")); !errors.Is(err, errClientStuck) || stuck.Load() != 1 {
		t.Errorf("a write after the disconnect: %v (stuck %d)", err, stuck.Load())
	}
	if b := o.Buffered(); b != 0 {
		t.Errorf("%d bytes still queued after the disconnect", b)
	}
	pr.CloseWithError(errors.New("connection aborted")) // as the HTTP abort does
	select {
	case <-o.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the writing goroutine did not end")
	}
}

// TestOutboxOrderAndClose: what a reading client gets is every write, in order; Close
// writes out what is queued and ends the goroutine; later writes fail.
func TestOutboxOrderAndClose(t *testing.T) {
	pr, pw := io.Pipe()
	o := newOutbox(pw, 1<<20, func() { t.Error("stuck called for a reading client") })
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(pr)
		got <- b
	}()
	var want bytes.Buffer
	for i := range 1000 {
		line := []byte{byte('a' + i%26), '\n'}
		want.Write(line)
		if _, err := o.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	o.Close(10 * time.Second)
	select {
	case <-o.done:
	default:
		t.Fatal("Close returned before the queue was written")
	}
	if _, err := o.Write([]byte("late\n")); err == nil {
		t.Error("a write after Close succeeded")
	}
	pw.Close()
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Errorf("the client got %d bytes, want %d in order", len(b), want.Len())
	}
}
