package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Outcomes of an audited request.
const (
	OutcomeOK            = "ok"
	OutcomeToolError     = "tool_error"     // the tool ran and reported an error (isError)
	OutcomeProtocolError = "protocol_error" // a JSON-RPC error, from the upstream or the proxy
	OutcomeDenied        = "denied"
	OutcomeRateLimited   = "rate_limited"
	OutcomeCancelled     = "cancelled"
	OutcomeInvalid       = "invalid" // refused before routing: not taken as a request (see Chain.Refused)
)

// DefinitionMethod is the method of the audit records of a definition that pinning or
// screening reported (a new or changed definition, findings), with the decision
// DecisionWithheld or DecisionFlagged: not a request, what a catalogue fetch found.
const (
	DefinitionMethod = "catalogue"
	DecisionWithheld = "withheld"
	DecisionFlagged  = "flagged"
)

// Record is one audited request: who asked what of whom, what was decided, and how it
// ended.
type Record struct {
	Time      time.Time `json:"time"`
	Principal string    `json:"principal"` // the principal's name
	// Identity is the principal's identity (principal.ID: "api_key:alice",
	// "jwt:https://idp.example.com#alice"): who it is, where the name alone could be two
	// people.
	Identity   string          `json:"identity,omitempty"`
	Client     string          `json:"client,omitempty"`
	Endpoint   string          `json:"endpoint,omitempty"` // the endpoint the call came through; none: the listen path or plain stdio
	Method     string          `json:"method"`
	Kind       string          `json:"kind"`
	Upstream   string          `json:"upstream"`
	Exposed    string          `json:"name"`
	Original   string          `json:"original_name,omitempty"`
	Decision   string          `json:"decision"` // allow, deny, rate_limited, invalid
	Rule       string          `json:"rule"`
	LatencyMs  float64         `json:"latency_ms"`
	Outcome    string          `json:"outcome"`
	Error      string          `json:"error,omitempty"`
	ArgsSHA256 string          `json:"args_sha256,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	// Definition is, for a record of a definition's pinning or screening (Method
	// DefinitionMethod), what was found: the changed fields and the findings.
	Definition json.RawMessage `json:"definition,omitempty"`
	// Plugins are what the plugins' hooks decided, in the order they ran.
	Plugins []PluginNote `json:"plugins,omitempty"`
	// TraceID is the call's trace when it is traced (sampled, or the client sent its own
	// trace context); SpanID the proxy's server span of it, when the proxy records one.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	// Credential is the credential mode that served a call to a per-user upstream
	// ("exchange", "oauth", "secret"; docs/credentials.md), UpstreamSubject whom the
	// upstream knows the call as, when the proxy can tell (never a token).
	Credential      string `json:"credential,omitempty"`
	UpstreamSubject string `json:"upstream_subject,omitempty"`

	cred router.CredentialNote // filled in by the router when it admits the call
}

// PluginNote is what one plugin hook decided about an audited call.
type PluginNote struct {
	Plugin   string          `json:"plugin"`
	Hook     string          `json:"hook"`     // before, after
	Decision string          `json:"decision"` // allow, deny, rewrite, keep, error, failed_open, failed_closed
	Notes    json.RawMessage `json:"notes,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// AuditOptions configures the audit trail.
type AuditOptions struct {
	File string // append-only JSONL file; "" for none
	Log  bool   // also one log line per record (stderr)
	// Arguments: "hash" (default: their SHA-256 only), "full" (recorded, with Redact
	// fields replaced), or "none".
	Arguments string
	Redact    []string // argument field names whose values are never recorded (any depth)
}

// Auditor writes records to its sinks. Records are encoded by the caller and written by
// one writer goroutine to a file opened with O_APPEND, whole lines at a time (records
// never interleave), several per write(2) under load; the call does not wait for the
// disk. A full queue makes callers wait rather than drop records. Close writes what is
// queued.
type Auditor struct {
	opts   AuditOptions
	log    zerolog.Logger
	redact map[string]bool

	f      *os.File
	queue  chan []byte
	done   chan struct{}
	closed sync.Once
	mu     sync.RWMutex // held for reading while queueing, for writing while closing
	shut   bool
}

// NewAuditor opens the sinks.
func NewAuditor(opts AuditOptions, log zerolog.Logger) (*Auditor, error) {
	switch opts.Arguments {
	case "":
		opts.Arguments = "hash"
	case "hash", "full", "none":
	default:
		return nil, fmt.Errorf("audit arguments must be hash, full or none, got %q", opts.Arguments)
	}
	a := &Auditor{opts: opts, log: log, redact: map[string]bool{}}
	for _, r := range opts.Redact {
		a.redact[strings.ToLower(r)] = true
	}
	if opts.File != "" {
		f, err := os.OpenFile(opts.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("opening the audit file: %w", err)
		}
		a.f = f
		a.queue = make(chan []byte, 4096)
		a.done = make(chan struct{})
		go a.writer()
	}
	return a, nil
}

// writer appends queued records to the file.
func (a *Auditor) writer() {
	defer close(a.done)
	var buf []byte
	for line := range a.queue {
		buf = append(buf[:0], line...)
		for more := true; more && len(buf) < 1<<20; { // take whatever else is queued
			select {
			case l, ok := <-a.queue:
				if !ok {
					more = false
					break
				}
				buf = append(buf, l...)
			default:
				more = false
			}
		}
		if _, err := a.f.Write(buf); err != nil {
			a.log.Error().Err(err).Str("file", a.opts.File).Msg("audit records could not be written")
		}
	}
}

// Close writes the queued records and closes the file.
func (a *Auditor) Close() error {
	if a == nil || a.f == nil {
		return nil
	}
	var err error
	a.closed.Do(func() {
		a.mu.Lock()
		a.shut = true
		close(a.queue)
		a.mu.Unlock()
		<-a.done
		err = a.f.Close()
	})
	return err
}

// arguments fills the record's view of the arguments per the options.
func (a *Auditor) arguments(rec *Record, args json.RawMessage) {
	if a == nil || len(args) == 0 {
		return
	}
	switch a.opts.Arguments {
	case "hash":
		sum := sha256.Sum256(args)
		rec.ArgsSHA256 = hex.EncodeToString(sum[:])
	case "full":
		rec.Args = a.redacted(args)
	}
}

// refusedArguments fills a refused request's record with the hash of its arguments as
// received, unless the mode is none: never the bytes themselves (see Chain.Refused).
func (a *Auditor) refusedArguments(rec *Record, args json.RawMessage) {
	if a == nil || len(args) == 0 || a.opts.Arguments == "none" {
		return
	}
	sum := sha256.Sum256(args)
	rec.ArgsSHA256 = hex.EncodeToString(sum[:])
}

// redacted replaces the values of redacted fields, at any depth.
func (a *Auditor) redacted(v json.RawMessage) json.RawMessage {
	if len(a.redact) == 0 || len(v) == 0 {
		return v
	}
	switch v[0] {
	case '{':
		var changes []jsonx.Change
		_ = jsonx.Each(v, func(f jsonx.Field) bool {
			k, err := jsonx.Unquote(f.RawKey)
			if err != nil {
				return true
			}
			val := f.Value
			if a.redact[strings.ToLower(k)] {
				changes = append(changes, jsonx.Change{Key: k, Value: []byte(`"[redacted]"`)})
			} else if len(val) > 0 && (val[0] == '{' || val[0] == '[') {
				if r := a.redacted(val); string(r) != string(val) {
					changes = append(changes, jsonx.Change{Key: k, Value: r})
				}
			}
			return true
		})
		if len(changes) == 0 {
			return v
		}
		if out, err := jsonx.Edit(v, changes); err == nil {
			return out
		}
		return json.RawMessage(`"[unrecordable]"`)
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil {
			return v
		}
		changed := false
		for i, it := range items {
			if r := a.redacted(it); string(r) != string(it) {
				items[i], changed = r, true
			}
		}
		if !changed {
			return v
		}
		out, _ := json.Marshal(items)
		return out
	}
	return v
}

// Write records one request.
func (a *Auditor) Write(rec *Record) {
	if a == nil {
		return
	}
	if a.opts.Log {
		ev := a.log.Info().Str("audit", rec.Decision).Str("principal", rec.Principal).Str("method", rec.Method).
			Str("upstream", rec.Upstream).Str("name", rec.Exposed).Str("rule", rec.Rule).
			Str("outcome", rec.Outcome).Float64("latency_ms", rec.LatencyMs)
		if rec.Identity != "" {
			ev = ev.Str("identity", rec.Identity)
		}
		if rec.Client != "" {
			ev = ev.Str("client", rec.Client)
		}
		if rec.Error != "" {
			ev = ev.Str("error", rec.Error)
		}
		if rec.TraceID != "" {
			ev = ev.Str("trace_id", rec.TraceID)
		}
		if rec.SpanID != "" {
			ev = ev.Str("span_id", rec.SpanID)
		}
		ev.Msg("audit")
	}
	if a.f == nil {
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		a.log.Error().Err(err).Msg("audit record could not be encoded")
		return
	}
	b = append(b, '\n')
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.shut {
		a.log.Warn().Str("principal", rec.Principal).Str("name", rec.Exposed).Msg("audit record after the audit trail closed; logged only")
		return
	}
	a.queue <- b
}
