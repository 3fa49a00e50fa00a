package telemetry

import (
	"encoding/json"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// Attribute keys: the OpenTelemetry semantic conventions for MCP, JSON-RPC and GenAI
// where they have one, the proxy's own under mcp_proxy.
const (
	keyMethod          = attribute.Key("mcp.method.name")
	keySessionID       = attribute.Key("mcp.session.id")
	keyProtocolVersion = attribute.Key("mcp.protocol.version")
	keyResourceURI     = attribute.Key("mcp.resource.uri")
	keyToolName        = attribute.Key("gen_ai.tool.name")
	keyPromptName      = attribute.Key("gen_ai.prompt.name")
	keyOperation       = attribute.Key("gen_ai.operation.name")
	keyRequestID       = attribute.Key("jsonrpc.request.id")
	keyStatusCode      = attribute.Key("rpc.response.status_code")
	keyErrorType       = attribute.Key("error.type")

	keyUpstream    = attribute.Key("mcp_proxy.upstream")     // the upstream that owns the target
	keyExposedName = attribute.Key("mcp_proxy.exposed_name") // on the upstream leg: the name the client used, when the upstream's differs
	keyOutcome     = attribute.Key("mcp_proxy.outcome")      // see outcomeOf
	keyErrorOrigin = attribute.Key("mcp_proxy.error.origin") // proxy or upstream, for an error answer
	keyTaskID      = attribute.Key("mcp_proxy.task.id")      // tasks/get, tasks/result, tasks/cancel
	keyEndpoint    = attribute.Key("mcp_proxy.endpoint")     // the endpoint block the request came through
)

// Outcomes (mcp_proxy.outcome) of a call, as the client sees it on the request span and
// as the upstream answered on the upstream span.
const (
	OutcomeOK          = "ok"
	OutcomeToolError   = "tool_error"   // a result with isError: true
	OutcomeError       = "error"        // a JSON-RPC error from the upstream, or one the proxy does not name below
	OutcomeDenied      = "denied"       // policy rules or a plugin refused (-31005, -31007)
	OutcomeRateLimited = "rate_limited" // -31006
	OutcomeUnavailable = "unavailable"  // the upstream is down or restarting (-31000)
	OutcomeTimeout     = "timeout"      // the upstream did not answer in time (-31001)
	OutcomeFailed      = "failed"       // the upstream or a plugin failed mid-call (-31002, -31003, -31004, -31008)
	OutcomeCancelled   = "cancelled"    // the client cancelled or went away
)

// targetName is the low-cardinality part of a span name after the method: the tool's or
// prompt's name ("" for resources, whose URIs are not low-cardinality, and tasks).
func targetName(t *router.Target, upstreamSide bool) string {
	if t == nil || (t.Kind != router.TargetTool && t.Kind != router.TargetPrompt) {
		return ""
	}
	if upstreamSide {
		return t.Original
	}
	return t.Name
}

// spanName is "{method} {target}", or the method alone.
func spanName(method string, t *router.Target, upstreamSide bool) string {
	if n := targetName(t, upstreamSide); n != "" {
		return method + " " + n
	}
	return method
}

// targetAttrs appends what the call is about: its tool, prompt, resource or task, as
// the client named it on the request span and as the upstream knows it on the leg.
func targetAttrs(attrs []attribute.KeyValue, c *router.Call, upstreamSide bool) []attribute.KeyValue {
	t := c.Target
	if t == nil {
		return attrs
	}
	name := t.Name
	if upstreamSide {
		name = t.Original
		if t.Original != t.Name && t.Kind != router.TargetTask {
			attrs = append(attrs, keyExposedName.String(t.Name))
		}
	}
	switch t.Kind {
	case router.TargetTool:
		attrs = append(attrs, keyToolName.String(name))
		if c.Method == mcp.MethodToolsCall {
			attrs = append(attrs, keyOperation.String("execute_tool"))
		}
	case router.TargetPrompt:
		attrs = append(attrs, keyPromptName.String(name))
	case router.TargetResource:
		attrs = append(attrs, keyResourceURI.String(name))
	case router.TargetTask:
		attrs = append(attrs, keyTaskID.String(t.Name))
	}
	if t.Upstream != "" {
		attrs = append(attrs, keyUpstream.String(t.Upstream))
	}
	return attrs
}

// requestAttrs appends what identifies the client's request: its id, its session, the
// protocol version a modern request states in _meta.
func requestAttrs(attrs []attribute.KeyValue, req *router.Request) []attribute.KeyValue {
	if req == nil {
		return attrs
	}
	if req.ID.IsValid() {
		attrs = append(attrs, keyRequestID.String(idText(req.ID)))
	}
	if req.Endpoint != "" {
		attrs = append(attrs, keyEndpoint.String(req.Endpoint))
	}
	if s, ok := req.Session.(interface{ SessionID() string }); ok {
		if id := s.SessionID(); id != "" {
			attrs = append(attrs, keySessionID.String(id))
		}
	}
	if req.Modern {
		if meta, ok, _ := jsonx.Get(req.Params, "_meta"); ok {
			if v, ok, _ := jsonx.GetString(meta, mcp.MetaProtocolVersion); ok {
				attrs = append(attrs, keyProtocolVersion.String(v))
			}
		}
	}
	return attrs
}

// idText is the conventions' string form of an id: a string's value, a number's text.
func idText(id jsonrpc.ID) string {
	if id.IsString() {
		if s, err := jsonx.Unquote([]byte(id.Raw())); err == nil {
			return s
		}
	}
	return id.Raw()
}

// finish records a call's outcome on span and ends it. The status is Error, with the
// error's message, exactly when error.type is set (as the conventions ask); a tool's
// error result sets error.type tool_error and leaves the status alone (the call itself
// succeeded).
func finish(span trace.Span, method string, res json.RawMessage, err error) {
	outcome := OutcomeOK
	var attrs [4]attribute.KeyValue
	a := attrs[:0]
	var je *jsonrpc.Error
	switch {
	case err == nil:
		if method == mcp.MethodToolsCall {
			if v, ok, _ := jsonx.Get(res, "isError"); ok && string(v) == "true" {
				outcome = OutcomeToolError
				a = append(a, keyErrorType.String(OutcomeToolError))
			}
		}
	case errors.Is(err, router.ErrCancelled):
		outcome = OutcomeCancelled
	case errors.As(err, &je):
		code := strconv.FormatInt(je.Code, 10)
		origin := "upstream"
		if o, _, _ := jsonx.GetString(je.Data, "origin"); o == "mcp-proxy" {
			origin = "proxy"
		}
		outcome = outcomeOf(je.Code)
		a = append(a, keyStatusCode.String(code), keyErrorType.String(code), keyErrorOrigin.String(origin))
		span.SetStatus(codes.Error, je.Message)
	default:
		outcome = OutcomeError
		a = append(a, keyErrorType.String("_OTHER"))
		span.SetStatus(codes.Error, err.Error())
	}
	a = append(a, keyOutcome.String(outcome))
	span.SetAttributes(a...)
	span.End()
}

// outcomeOf names the outcome an error code stands for.
func outcomeOf(code int64) string {
	switch code {
	case mcp.CodePolicyDenied, mcp.CodePluginDenied:
		return OutcomeDenied
	case mcp.CodeRateLimited:
		return OutcomeRateLimited
	case mcp.CodeUpstreamUnavailable:
		return OutcomeUnavailable
	case mcp.CodeUpstreamTimeout:
		return OutcomeTimeout
	case mcp.CodeUpstreamFailed, mcp.CodeMessageTooLarge, mcp.CodeUpstreamProtocol, mcp.CodePluginFailed:
		return OutcomeFailed
	}
	return OutcomeError
}
