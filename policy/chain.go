package policy

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Chain is the proxy's policy: what principals may see (Visible, a router.Guard) and what
// they may do (Stages, middlewares of the router's chain). Each part is optional (nil)
// and a missing part allows; a configured part that fails to decide refuses.
type Chain struct {
	Rules  *Engine
	Limits *Limiter
	Audit  *Auditor
	// Log gets what the client is not told: why a call was refused because the policy
	// could not decide (a rate-limit store that failed). The zero Logger discards.
	Log zerolog.Logger
	// Observer is told each decision of the rules and limits stages (see Decided); nil
	// for nobody. Set it before Stages.
	Observer Observer
	// TraceIDs names the trace of a call from its context, for its audit record: the
	// trace id and the id of the span the proxy records for it, each "" when there is
	// none (telemetry.IDs). Nil when the proxy does not trace.
	TraceIDs func(ctx context.Context) (traceID, spanID string)

	// storeFailures throttles the log of calls refused because the bucket store failed:
	// while Redis is down every limited call is refused, and one line per refusal
	// would flood the log (each is still in the audit trail and the metrics).
	storeFailures logThrottle
}

// logThrottle lets one line through per interval, and counts the ones it held back.
type logThrottle struct {
	next       atomic.Int64 // unix ns before which lines are held back
	suppressed atomic.Int64 // held back since the last line let through
}

// storeFailureLogEvery is how often a refusal for a failed bucket store is logged.
const storeFailureLogEvery = 10 * time.Second

// allow reports whether a line may be written now, and how many were held back before it.
func (t *logThrottle) allow(now time.Time, every time.Duration) (bool, int64) {
	next := t.next.Load()
	if now.UnixNano() < next || !t.next.CompareAndSwap(next, now.Add(every).UnixNano()) {
		t.suppressed.Add(1)
		return false, 0
	}
	return true, t.suppressed.Swap(0)
}

var _ router.Guard = (*Chain)(nil)

// Stages returns the policy as middlewares of the router's chain, in their fixed order:
//
//  1. audit (outermost, so that it records every outcome, refusals by the stages after
//     it included),
//  2. rules (allow/deny, conditions on the call's arguments as they go upstream),
//  3. limits (rate and concurrency; the token is taken only for calls the rules allow).
//
// Plugins (package plugins) follow the limits: they see only what the policy allowed,
// their before hooks run in file order and their after hooks in reverse, and the audit
// record, written last, holds what each decided (Record.Plugins).
func (c *Chain) Stages() []router.Middleware {
	return []router.Middleware{c.AuditStage, c.RulesStage, c.LimitsStage}
}

// policed reports whether the policy decides on a routed method: calls, prompts, reads
// and completions. Subscriptions need only visibility (the router checks it), and a
// task's requests belong to the principal that created the task (the router checks it).
func policed(method string) bool {
	switch method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead, mcp.MethodCompletionComplete:
		return true
	}
	return false
}

// policedOnly is a stage that sees only the methods the policy decides on; the others
// go straight on to next.
func policedOnly(next, stage router.Handler) router.Handler {
	return func(ctx context.Context, call *router.Call, reply router.Reply) {
		if !policed(call.Method) {
			next(ctx, call, reply)
			return
		}
		stage(ctx, call, reply)
	}
}

func kindOf(k router.TargetKind) Kind {
	switch k {
	case router.TargetTool:
		return KindTool
	case router.TargetPrompt:
		return KindPrompt
	}
	return KindResource
}

func itemOf(t *router.Target) Item {
	return Item{Kind: kindOf(t.Kind), Name: t.Name, Upstream: t.Upstream, Raw: t.Raw, Aliases: t.Forms, Proxy: t.Proxy}
}

// argumentsOf returns the arguments of a call or prompt as they go upstream.
func argumentsOf(call *router.Call) json.RawMessage {
	if call.Method == mcp.MethodToolsCall || call.Method == mcp.MethodPromptsGet {
		args, _, _ := jsonx.Get(call.Params, "arguments")
		return args
	}
	return nil
}

// Visible implements router.Guard.
func (c *Chain) Visible(req *router.Request, t *router.Target) bool {
	if c.Rules == nil {
		return true
	}
	it := itemOf(t)
	it.Endpoint = req.Endpoint
	return c.Rules.Visible(req.Principal, &it)
}

// recordKey carries a call's audit record from the audit stage to the stages after it.
type recordKey struct{}

// RecordOf returns the audit record of the call whose context ctx is, or nil when the
// call is not audited: the stages after the audit stage (plugins) note their decisions
// in it. It is used by one call's stages in turn, never concurrently.
func RecordOf(ctx context.Context) *Record { return recordOf(ctx) }

func recordOf(ctx context.Context) *Record {
	rec, _ := ctx.Value(recordKey{}).(*Record)
	return rec
}

// AuditStage records one audit record per policed call, with the decision the later
// stages took and the outcome. Without an audit trail it passes calls through untouched.
func (c *Chain) AuditStage(next router.Handler) router.Handler {
	if c.Audit == nil {
		return next
	}
	return policedOnly(next, func(ctx context.Context, call *router.Call, reply router.Reply) {
		start := time.Now()
		t, req := call.Target, call.Request
		rec := &Record{Time: start, Method: call.Method, Kind: kindOf(t.Kind).String(), Upstream: t.Upstream,
			Exposed: t.Name, Rule: "none", Decision: "allow", Endpoint: req.Endpoint}
		if t.Original != t.Name {
			rec.Original = t.Original
		}
		if p := req.Principal; p != nil {
			rec.Principal, rec.Identity = p.Name, p.ID()
		}
		if req.Meta != nil && len(req.Meta.Info) > 0 {
			rec.Client, _, _ = jsonx.GetString(req.Meta.Info, "name")
		}
		if c.TraceIDs != nil {
			rec.TraceID, rec.SpanID = c.TraceIDs(ctx)
		}
		c.Audit.arguments(rec, argumentsOf(call))
		ctx = router.WithCredentialNote(context.WithValue(ctx, recordKey{}, rec), &rec.cred)
		next(ctx, call, func(res json.RawMessage, err error) {
			rec.LatencyMs = float64(time.Since(start).Microseconds()) / 1000
			rec.Credential, rec.UpstreamSubject = rec.cred.Mode, rec.cred.Subject
			if rec.Outcome == "" { // not refused by a stage of the policy
				rec.Outcome = outcomeOf(res, err)
				if err != nil && !errors.Is(err, router.ErrCancelled) {
					var je *jsonrpc.Error
					if errors.As(err, &je) {
						rec.Error = je.Message
					} else {
						rec.Error = err.Error()
					}
				}
			}
			c.Audit.Write(rec)
			reply(res, err)
		})
	})
}

// RefusalHook returns Refused as the router's refusal hook, or nil without an audit
// trail (then nothing is read of what the front ends refuse).
func (c *Chain) RefusalHook() router.RefusalHook {
	if c.Audit == nil {
		return nil
	}
	return c.Refused
}

// Refused implements router.RefusalHook: a request refused before it was routed (the
// front end could not take it as a request, or the router could not resolve its params)
// that names a method the audit covers gets a record of its own, decision and outcome
// "invalid", with the principal and the reason the client was told. Its arguments are
// recorded only as their hash, in both hash and full mode (nothing in none mode): the
// bytes of a refused request are not interpreted, so they cannot be redacted reliably.
// Without an audit trail it does nothing.
func (c *Chain) Refused(ctx context.Context, ref *router.Refusal) {
	if c.Audit == nil {
		return
	}
	method := ""
	for _, m := range ref.Methods {
		if policed(m) {
			method = m
			break
		}
	}
	if method == "" {
		return
	}
	rec := &Record{Time: time.Now(), Method: method, Kind: methodKind(method), Decision: DecisionInvalid,
		Rule: "none", Outcome: OutcomeInvalid, Error: ref.Reason, Client: ref.Client}
	if p := ref.Principal; p != nil {
		rec.Principal, rec.Identity = p.Name, p.ID()
	}
	if c.TraceIDs != nil {
		rec.TraceID, rec.SpanID = c.TraceIDs(ctx)
	}
	c.Audit.refusedArguments(rec, ref.Arguments)
	c.Audit.Write(rec)
}

// methodKind is the kind of item a policed method is about, before it is resolved.
func methodKind(method string) string {
	switch method {
	case mcp.MethodToolsCall:
		return KindTool.String()
	case mcp.MethodPromptsGet:
		return KindPrompt.String()
	case mcp.MethodResourcesRead:
		return KindResource.String()
	}
	return "completion"
}

func outcomeOf(res json.RawMessage, err error) string {
	switch {
	case errors.Is(err, router.ErrCancelled):
		return OutcomeCancelled
	case err != nil:
		return OutcomeProtocolError
	}
	if v, ok, _ := jsonx.Get(res, "isError"); ok && string(v) == "true" {
		return OutcomeToolError
	}
	return OutcomeOK
}

// RulesStage refuses what the rules do not allow: a call the principal may not see
// answers as if it did not exist, any other refusal is -31005 naming the rule.
func (c *Chain) RulesStage(next router.Handler) router.Handler {
	if c.Rules == nil {
		return next
	}
	return policedOnly(next, func(ctx context.Context, call *router.Call, reply router.Reply) {
		it := itemOf(call.Target)
		it.Endpoint = call.Request.Endpoint
		p := call.Request.Principal
		var d Decision
		if call.Method == mcp.MethodCompletionComplete {
			// Completing a prompt's or template's arguments needs only the right to see it.
			d = Decision{Allow: c.Rules.Visible(p, &it), Rule: "visibility"}
			if !d.Allow {
				d.Reason = "not visible to the principal"
			}
		} else {
			d = c.Rules.Decide(p, &it, argumentsOf(call))
		}
		rec := recordOf(ctx)
		if rec != nil {
			rec.Rule = d.Rule
		}
		if c.Observer != nil {
			decision := DecisionDeny
			if d.Allow {
				decision = DecisionAllow
			}
			c.observe(Decided{Stage: StageRules, Method: call.Method, Upstream: call.Target.Upstream, Rule: d.Rule, Decision: decision})
		}
		if d.Allow {
			next(ctx, call, reply)
			return
		}
		if rec != nil {
			rec.Decision, rec.Outcome, rec.Error = "deny", OutcomeDenied, d.Reason
		}
		if !it.Proxy && !c.Rules.Visible(p, &it) {
			// What the principal may not see does not exist for it (the proxy's own
			// tools are listed whatever the rules: refused, not unknown).
			reply(nil, router.UnknownError(call.Target.Kind, call.Target.Name))
			return
		}
		reply(nil, mcp.ProxyError(mcp.CodePolicyDenied, "", "mcp-proxy policy: "+d.Reason))
	})
}

// LimitsStage takes a token from every rate limit that applies (or from none) and holds
// a place of the upstream's max_in_flight until the call ends; over a limit it refuses
// with -31006, data.limit and data.retryAfterMs. When the limits cannot be checked (the
// bucket store failed) it fails closed: the call is refused with a proxy error (-32603,
// data.origin "mcp-proxy") and the store's error is logged; a call whose client went
// away meanwhile is cancelled.
func (c *Chain) LimitsStage(next router.Handler) router.Handler {
	if c.Limits == nil {
		return next
	}
	return policedOnly(next, func(ctx context.Context, call *router.Call, reply router.Reply) {
		it := itemOf(call.Target)
		it.Endpoint = call.Request.Endpoint
		release, refusal := c.Limits.AdmitContext(ctx, call.Request.Principal, &it)
		if refusal != nil && refusal.Err != nil && ctx.Err() != nil {
			reply(nil, router.ErrCancelled) // the client went away while the store was asked
			return
		}
		if refusal != nil && refusal.Err != nil {
			if ok, held := c.storeFailures.allow(time.Now(), storeFailureLogEvery); ok {
				c.Log.Error().Ctx(ctx).Err(refusal.Err).Str("method", call.Method).Str("upstream", it.Upstream).
					Str("limit", refusal.Limit).Int64("refused_since_last_line", held).
					Msg("rate limits could not be checked; call refused (logged at most once every 10s)")
			}
			c.observe(Decided{Stage: StageLimits, Method: call.Method, Upstream: it.Upstream, Rule: refusal.Limit, Decision: DecisionError})
			if rec := recordOf(ctx); rec != nil {
				rec.Decision, rec.Outcome, rec.Error, rec.Rule = "rate_limited", OutcomeProtocolError, refusal.Message, refusal.Limit
			}
			reply(nil, mcp.ProxyError(jsonrpc.CodeInternalError, "", "mcp-proxy: "+refusal.Message))
			return
		}
		if refusal != nil {
			c.observe(Decided{Stage: StageLimits, Method: call.Method, Upstream: it.Upstream, Rule: refusal.Limit, Decision: DecisionRateLimited})
			if rec := recordOf(ctx); rec != nil {
				rec.Decision, rec.Outcome, rec.Error, rec.Rule = "rate_limited", OutcomeRateLimited, refusal.Message, refusal.Limit
			}
			e := mcp.ProxyError(mcp.CodeRateLimited, "", "mcp-proxy: "+refusal.Message)
			e.Data, _ = jsonx.Marshal(map[string]any{"origin": "mcp-proxy", "limit": refusal.Limit,
				"retryAfterMs": refusal.RetryAfter.Milliseconds()})
			reply(nil, e)
			return
		}
		next(ctx, call, func(res json.RawMessage, err error) {
			release()
			reply(res, err)
		})
	})
}
