package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
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

// TestOutboxDirectToPipe: with a pipe's room check, a write to an idle outbox is in the
// pipe when Write returns (the caller wrote it); a client that reads nothing fills the
// pipe, and from then on writes queue without ever blocking the caller, until the
// limit disconnects the client. What the client reads is every accepted write, in
// order.
func TestOutboxDirectToPipe(t *testing.T) {
	// Lines of 1001 bytes fill a pipe's pages; of 1100 and 2100 bytes they leave part of
	// every page unused, so that the pipe is full with fewer unread bytes than its size
	// (a room check on the unread bytes then let a write block: the client was never cut
	// off).
	for _, size := range []int{1001, 1100, 2100} {
		t.Run(fmt.Sprint(size), func(t *testing.T) { testOutboxDirectToPipe(t, size) })
	}
}

func testOutboxDirectToPipe(t *testing.T, size int) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	room := pipeRoom(pw)
	if room == nil {
		t.Skip("no pipe room check on this platform")
	}
	var stuck atomic.Int32
	o := newOutbox(pw, 256<<10, func() { stuck.Add(1) })
	o.setRoom(room)

	first := []byte("first\n")
	if _, err := o.Write(first); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(first))
	if _, err := io.ReadFull(pr, got); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("read %q, %v", got, err)
	}
	if !room(len(first)) {
		t.Fatal("an empty pipe has no room")
	}

	// Nobody reads now: the pipe fills, then the queue, then the client is cut off.
	var want bytes.Buffer
	line := append(bytes.Repeat([]byte("x"), size-1), '\n')
	full := false // the pipe is full: the writer no longer waits for the outbox
	for i := 0; stuck.Load() == 0; i++ {
		line[0] = byte('a' + i%26)
		if _, err := o.Write(line); err != nil {
			if !errors.Is(err, errClientStuck) {
				t.Fatalf("write %d: %v", i, err)
			}
			break
		}
		want.Write(line)
		if i > 10_000 {
			t.Fatal("the client was never cut off")
		}
		// A writer slower than the outbox: wait until its goroutine has written what is
		// queued, or the pipe is full (it takes nothing more: the goroutine is blocked in
		// its write; from then on the writer waits no more). Else a burst can pass the
		// limit while the goroutine, descheduled in the middle of a small write that
		// would not block, counts as writing (or before it ever ran), and the client is
		// cut off (as designed: see outbox) with a nearly empty pipe, which leaves
		// nothing to check here. (A yield per write was not enough under -race with more
		// Ps than cores: 2 failures in 90 runs.)
		for last, since := pipeUnread(pr), time.Now(); !full && o.Buffered() > 0; runtime.Gosched() {
			if u := pipeUnread(pr); u != last {
				last, since = u, time.Now()
			} else if time.Since(since) > 50*time.Millisecond {
				full = true // the pipe took nothing more for a while: the goroutine is blocked
			}
		}
	}
	if stuck.Load() != 1 {
		t.Fatalf("stuck called %d times", stuck.Load())
	}
	// The outbox's goroutine fills the pipe with what it took before the queue was
	// dropped; it may not have started its write yet (the scheduler's choice).
	for deadline := time.Now().Add(10 * time.Second); pipeUnread(pr) < 32<<10 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	// What went into the pipe before the queue was dropped is a prefix of what was
	// accepted, in order (the outbox's goroutine may have been cut off in the middle of
	// a line: the client is disconnected).
	pw.Close()
	o.Close(waitFor)
	b, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 32<<10 || !bytes.HasPrefix(want.Bytes(), b) {
		t.Errorf("the client read %d bytes, not a prefix of the %d accepted that fills most of the pipe", len(b), want.Len())
	}
}

// TestOutboxDirectOrder: writers racing on an outbox with a room check (some write
// directly, others queue behind them) lose nothing and keep each writer's order.
func TestOutboxDirectOrder(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	room := pipeRoom(pw)
	if room == nil {
		t.Skip("no pipe room check on this platform")
	}
	o := newOutbox(pw, 64<<20, func() { t.Error("stuck called for a reading client") })
	o.setRoom(room)
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(pr)
		read <- b
	}()
	const writers, each = 8, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := fmt.Fprintf(o, "%d %d\n", w, i); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	o.Close(waitFor)
	pw.Close()
	next := make([]int, writers)
	for line := range strings.Lines(string(<-read)) {
		var w, i int
		if _, err := fmt.Sscanf(line, "%d %d\n", &w, &i); err != nil || w < 0 || w >= writers {
			t.Fatalf("line %q", line)
		}
		if i != next[w] {
			t.Fatalf("writer %d: line %d after %d", w, i, next[w]-1)
		}
		next[w]++
	}
	for w, n := range next {
		if n != each {
			t.Errorf("writer %d: %d lines read, want %d", w, n, each)
		}
	}
}
