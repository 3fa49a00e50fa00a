package server

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// stdioInput reads a stdio session's input and handles each line on the reading
// goroutine. A request to an upstream over Streamable HTTP runs its exchange on the
// goroutine that dispatches it (router.InlineContext): when the reader dispatches one,
// it hands the reading over to another goroutine just before the exchange starts
// (leader/follower) and goes on as the request's goroutine. The request thus leaves at
// once, on the thread that read it, instead of waiting for another thread to wake up
// and run its exchange, and no goroutine is started for the exchange itself. Requests
// to child processes, answered from the upstream's reader, never hand the reading over.
//
// The goroutine that takes the reading is the spare, when there is one: a request's
// goroutine that has finished waits as the spare (one at most), so that at concurrency
// 1 two goroutines, their stacks grown, take turns, instead of a new one per request.
//
// Exactly one goroutine reads at a time: a reader reads again only if it still holds
// the turn of the line it handled (nothing claimed it), and the turn is claimed once.
type stdioInput struct {
	ss   *session
	ctx  context.Context
	done chan<- error  // the input's end, sent by the last reader
	stop chan struct{} // closed when the session's serve returns: the spare ends
	// spare is where a goroutine waiting to read next leaves the channel it waits on;
	// it receives the uncork of the reading it takes over.
	spare chan chan func()
}

func newStdioInput(ss *session, ctx context.Context, done chan<- error) *stdioInput {
	return &stdioInput{ss: ss, ctx: ctx, done: done, stop: make(chan struct{}), spare: make(chan chan func(), 1)}
}

// start starts the first reader.
func (in *stdioInput) start() { go in.read(nil) }

// close ends the spare, if any; readers and requests in flight end on their own.
func (in *stdioInput) close() { close(in.stop) }

// handOver gives the reading, with the burst's uncork, to the spare or a new goroutine.
func (in *stdioInput) handOver(uncork func()) {
	select {
	case wake := <-in.spare:
		select {
		case wake <- uncork: // unbuffered: the spare is the reader now
		case <-in.stop: // the session is over (the spare too): nobody reads any more
			if uncork != nil {
				uncork()
			}
		}
	default:
		go in.read(uncork)
	}
}

// read is a goroutine of the input: it reads until the input ends or a line it handles
// takes the reading over, then, once that line is handled, waits as the spare.
func (in *stdioInput) read(uncork func()) {
	rd := &stdioReader{in: in, uncork: uncork}
	var wake chan func()
	for {
		if !rd.run() {
			return // the input ended
		}
		if wake == nil {
			wake = make(chan func())
		}
		select {
		case in.spare <- wake:
		default:
			return // another goroutine is the spare
		}
		select {
		case rd.uncork = <-wake:
		case <-in.stop:
			return
		}
	}
}

// stdioReader is one goroutine's reading of a stdio session's input.
type stdioReader struct {
	in *stdioInput
	// uncork ends the cork of the upstreams' writes held while a burst of buffered lines
	// is handled; it passes to the next reader with the reading.
	uncork func()
	turn   atomic.Pointer[readerTurn] // the line being handled, while it may still claim the reading
}

// readerTurn is one line's claim on the reading: the request's inline context and the
// hook that hands the reading over when its exchange starts.
type readerTurn struct {
	rd *stdioReader
	ic router.InlineContext
}

// InlineStarted implements router.InlineHook: it runs on the goroutine about to run the
// exchange. If the line is still being handled by the reader, a new reader takes over.
// (A stage that dispatches the call later from a goroutine of its own also runs it
// inline there; the reader, having moved on, keeps reading.)
func (t *readerTurn) InlineStarted() {
	rd := t.rd
	if !rd.turn.CompareAndSwap(t, nil) {
		return
	}
	uncork := rd.uncork
	rd.uncork = nil
	rd.in.handOver(uncork)
}

// InlineEnded implements router.InlineHook.
func (t *readerTurn) InlineEnded() {}

var _ router.InlineHook = (*readerTurn)(nil)

// run reads and handles lines until the input ends (then it reports the end and
// returns false) or a line it handled took the reading over (true).
func (rd *stdioReader) run() bool {
	in := rd.in
	ss := in.ss
	for {
		if rd.uncork != nil && ss.stream.Buffered() == 0 {
			rd.uncork() // about to wait for the client: send the burst upstream
			rd.uncork = nil
		}
		line, err := ss.stream.ReadLine()
		if rd.uncork == nil && err == nil && ss.stream.Buffered() > 0 {
			rd.uncork = ss.s.r.CorkUpstreams()
		}
		if err != nil {
			if errors.Is(err, jsonrpc.ErrMessageTooLarge) {
				ss.log.Warn().Err(err).Msg("message from client over the size limit; skipped")
				var tl *jsonrpc.TooLargeError
				if errors.As(err, &tl) {
					ss.s.refused(in.ctx, tl.Head, "Invalid Request: "+err.Error())
				}
				ss.write(jsonrpc.NewErrorResponse(jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: %v", err)))
				continue
			}
			rd.end(err)
			return false
		}
		if in.ctx.Err() != nil {
			rd.end(in.ctx.Err())
			return false
		}
		if !rd.handle(line) {
			return true // the reading went to another goroutine
		}
	}
}

// end reports the input's end, with what the burst held sent first.
func (rd *stdioReader) end(err error) {
	if rd.uncork != nil {
		rd.uncork()
		rd.uncork = nil
	}
	rd.in.done <- err
}

// handle handles one line and reports whether this goroutine is still the reader. A
// batch never runs an exchange inline: its requests are dispatched one after another
// and must not wait for each other. Nor does a line with more lines already read behind
// it (a burst, the client has many requests in flight): handing the reading over costs
// a wake-up per line there, and saves none, since the reader is busy anyway.
func (rd *stdioReader) handle(line []byte) bool {
	if t := bytes.TrimLeft(line, " \t"); len(t) > 0 && t[0] == '[' {
		rd.in.ss.handleBatch(rd.in.ctx, t)
		return true
	}
	if rd.in.ss.stream.Buffered() > 0 {
		rd.in.ss.handleLine(rd.in.ctx, line)
		return true
	}
	t := &readerTurn{rd: rd}
	ctx := t.ic.InitExchange(rd.in.ctx, t) // a child's answer is read by its reader goroutine
	rd.turn.Store(t)
	rd.in.ss.handleLine(ctx, line) // line is not used once decoded: the next reader may reuse its buffer
	return rd.turn.CompareAndSwap(t, nil)
}
