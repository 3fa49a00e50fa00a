package policy

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Chain is the policy chain the router consults: rules, then limits, then the audit
// record. Each part is optional (nil) and a missing part allows; a configured part that
// fails to decide refuses.
type Chain struct {
	Rules  *Engine
	Limits *Limiter
	Audit  *Auditor
}

var _ router.Guard = (*Chain)(nil)

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
	return Item{Kind: kindOf(t.Kind), Name: t.Name, Upstream: t.Upstream, Raw: t.Raw, Aliases: t.Forms}
}

// Visible implements router.Guard.
func (c *Chain) Visible(req *router.Request, t *router.Target) bool {
	if c.Rules == nil {
		return true
	}
	it := itemOf(t)
	return c.Rules.Visible(req.Principal, &it)
}

// Admit implements router.Guard.
func (c *Chain) Admit(req *router.Request, t *router.Target) (func(json.RawMessage, error), error) {
	start := time.Now()
	it := itemOf(t)
	rec := &Record{Time: start, Method: req.Method, Kind: it.Kind.String(), Upstream: t.Upstream, Exposed: t.Name, Rule: "none"}
	if t.Original != t.Name {
		rec.Original = t.Original
	}
	if p := req.Principal; p != nil {
		rec.Principal = p.Name
	}
	if req.Meta != nil && len(req.Meta.Info) > 0 {
		rec.Client, _, _ = jsonx.GetString(req.Meta.Info, "name")
	}
	var args json.RawMessage
	if req.Method == mcp.MethodToolsCall || req.Method == mcp.MethodPromptsGet {
		args, _, _ = jsonx.Get(req.Params, "arguments")
	}
	c.Audit.arguments(rec, args)

	if c.Rules != nil {
		var d Decision
		if req.Method == mcp.MethodCompletionComplete {
			// Completing a prompt's or template's arguments needs only the right to see it.
			d = Decision{Allow: c.Rules.Visible(req.Principal, &it), Rule: "visibility"}
			if !d.Allow {
				d.Reason = "not visible to the principal"
			}
		} else {
			d = c.Rules.Decide(req.Principal, &it, args)
		}
		rec.Rule = d.Rule
		if !d.Allow {
			rec.Decision, rec.Outcome, rec.Error = "deny", OutcomeDenied, d.Reason
			c.Audit.Write(rec)
			if !c.Rules.Visible(req.Principal, &it) {
				// What the principal may not see does not exist for it.
				return nil, router.UnknownError(t.Kind, t.Name)
			}
			return nil, mcp.ProxyError(mcp.CodePolicyDenied, "", "mcp-proxy policy: "+d.Reason)
		}
	}
	release, refusal := c.Limits.Admit(req.Principal, &it)
	if refusal != nil {
		rec.Decision, rec.Outcome, rec.Error = "rate_limited", OutcomeRateLimited, refusal.Message
		rec.Rule = refusal.Limit
		c.Audit.Write(rec)
		e := mcp.ProxyError(mcp.CodeRateLimited, "", "mcp-proxy: "+refusal.Message)
		data, _ := json.Marshal(map[string]any{"origin": "mcp-proxy", "limit": refusal.Limit,
			"retryAfterMs": refusal.RetryAfter.Milliseconds()})
		e.Data = data
		return nil, e
	}
	rec.Decision = "allow"
	return func(res json.RawMessage, err error) {
		release()
		rec.LatencyMs = float64(time.Now().Sub(start).Microseconds()) / 1000
		switch {
		case errors.Is(err, router.ErrCancelled):
			rec.Outcome = OutcomeCancelled
		case err != nil:
			rec.Outcome = OutcomeProtocolError
			var je *jsonrpc.Error
			if errors.As(err, &je) {
				rec.Error = je.Message
			} else {
				rec.Error = err.Error()
			}
		default:
			rec.Outcome = OutcomeOK
			if v, ok, _ := jsonx.Get(res, "isError"); ok && string(v) == "true" {
				rec.Outcome = OutcomeToolError
			}
		}
		c.Audit.Write(rec)
	}, nil
}
