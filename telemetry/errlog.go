package telemetry

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// ErrorLog turns the OpenTelemetry SDK's errors (an export that failed, a full span
// queue) into log lines: the first at once, then at most one per Every, saying how many
// were left out, so that a collector that is down does not flood the log. Give it to
// otel.SetErrorHandler.
type ErrorLog struct {
	Log   zerolog.Logger
	Every time.Duration // default one minute

	mu      sync.Mutex // guards last and skipped
	last    time.Time
	skipped int
}

// Handle implements otel.ErrorHandler.
func (e *ErrorLog) Handle(err error) {
	every := e.Every
	if every <= 0 {
		every = time.Minute
	}
	e.mu.Lock()
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < every {
		e.skipped++
		e.mu.Unlock()
		return
	}
	skipped := e.skipped
	e.last, e.skipped = now, 0
	e.mu.Unlock()
	ev := e.Log.Warn().Err(err)
	if skipped > 0 {
		ev = ev.Int("more_errors", skipped)
	}
	ev.Msg("exporting traces")
}
