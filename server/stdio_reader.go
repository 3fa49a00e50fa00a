package server

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"

	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// stdioReader reads a stdio session's input and handles each line on its own goroutine.
// A request to an upstream over Streamable HTTP runs its exchange on the goroutine that
// dispatches it (router.InlineContext): when the reader dispatches one, it hands the
// reading over to a new reader just before the exchange starts (leader/follower) and
// goes on as the request's goroutine, which ends once the request has been answered.
// The request thus leaves at once, on the thread that read it, instead of waiting for
// another thread to wake up and run its exchange, and no goroutine is started for the
// exchange itself. Requests to child processes, answered from the upstream's reader,
// never hand the reading over.
//
// Exactly one goroutine reads at a time: a reader reads again only if it still holds
// the turn of the line it handled (nothing claimed it), and the turn is claimed once.
type stdioReader struct {
	ss   *session
	ctx  context.Context
	done chan<- error // the input's end, sent by the last reader

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
	next := &stdioReader{ss: rd.ss, ctx: rd.ctx, done: rd.done, uncork: rd.uncork}
	rd.uncork = nil
	go next.run()
}

// InlineEnded implements router.InlineHook.
func (t *readerTurn) InlineEnded() {}

var _ router.InlineHook = (*readerTurn)(nil)

// run reads and handles lines until the input ends (then it reports the end) or a line
// it handles takes the reading over.
func (rd *stdioReader) run() {
	ss := rd.ss
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
				ss.write(jsonrpc.NewErrorResponse(jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: %v", err)))
				continue
			}
			rd.end(err)
			return
		}
		if rd.ctx.Err() != nil {
			rd.end(rd.ctx.Err())
			return
		}
		if !rd.handle(line) {
			return // the reading went to another goroutine
		}
	}
}

// end reports the input's end, with what the burst held sent first.
func (rd *stdioReader) end(err error) {
	if rd.uncork != nil {
		rd.uncork()
		rd.uncork = nil
	}
	rd.done <- err
}

// handle handles one line and reports whether this goroutine is still the reader. A
// batch never runs an exchange inline: its requests are dispatched one after another
// and must not wait for each other.
func (rd *stdioReader) handle(line []byte) bool {
	if t := bytes.TrimLeft(line, " \t"); len(t) > 0 && t[0] == '[' {
		rd.ss.handleBatch(rd.ctx, t)
		return true
	}
	t := &readerTurn{rd: rd}
	ctx := t.ic.Init(rd.ctx, t)
	rd.turn.Store(t)
	rd.ss.handleLine(ctx, line) // line is not used once decoded: the next reader may reuse its buffer
	return rd.turn.CompareAndSwap(t, nil)
}
