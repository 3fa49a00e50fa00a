package credential

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// Call is what Admit knows of the call it admits: how to answer its client when the
// principal must first authorize the upstream in a browser.
type Call struct {
	Method string
	Params json.RawMessage
	// Modern: the client speaks the 2026-07-28 era (input_required results reach it).
	Modern bool
	// Capabilities are the client's (whether it declared elicitation in url mode); read
	// only when the call must be answered with a link.
	Capabilities json.RawMessage
	// Client is the client session the call came from (nil: none, a stateless request):
	// one given a url-mode elicitation (-32042) is told when its authorization completes
	// (notifications/elicitation/complete). It must be comparable (a pointer).
	Client Notifier
}

// Notifier is a client session the proxy can send a notification to (router.Client).
type Notifier interface {
	Notify(method string, params json.RawMessage)
}

// urlElicitation reports whether caps declare elicitation in url mode.
func urlElicitation(caps json.RawMessage) bool {
	var c struct {
		Elicitation *struct {
			URL *struct{} `json:"url"`
		} `json:"elicitation"`
	}
	return json.Unmarshal(caps, &c) == nil && c.Elicitation != nil && c.Elicitation.URL != nil
}

// Refusal is a call Admit does not let through, with its answer: Result (a tool
// result, an input_required result) or Err (a JSON-RPC error for the client).
type Refusal struct {
	Result json.RawMessage
	Err    *jsonrpc.Error
	Cause  error // why, for the log and the audit; never holds a token
}

func (r *Refusal) Error() string { return r.Cause.Error() }
func (r *Refusal) Unwrap() error { return r.Cause }

// errAuthorizationRequired is the cause of a refusal for want of a person's approval.
var errAuthorizationRequired = errors.New("the principal has not authorized the upstream yet")

// authorizeKey is the key of the proxy's own input request in an input_required result:
// a retry's inputResponses under it are the proxy's, not the upstream's.
const authorizeKey = "mcp-proxy/authorize"

// authorizationRequired answers call, made by a principal who must first open link
// (a single-use URL of the proxy's that leads to the upstream's authorization server),
// the way its client can take:
//
//   - a legacy client that declared url elicitation: the error -32042
//     (URLElicitationRequiredError) with the link as a url-mode elicitation;
//   - a modern client that declared it, on tools/call, prompts/get or resources/read:
//     an input_required result asking for that elicitation (its retry comes back
//     here, and goes through once the principal has authorized);
//   - any other client, on tools/call: a tool result with isError whose text carries
//     the link; on anything else, the error -31012 whose message carries it.
func authorizationRequired(upstream, link, id string, call Call) *Refusal {
	msg := fmt.Sprintf("Authorize mcp-proxy to use %q as you: open %s in your browser, then try again.", upstream, link)
	ref := &Refusal{Cause: fmt.Errorf("upstream %q: %w", upstream, errAuthorizationRequired)}
	routed := call.Method == mcp.MethodToolsCall || call.Method == mcp.MethodPromptsGet || call.Method == mcp.MethodResourcesRead
	url := urlElicitation(call.Capabilities)
	switch {
	case url && !call.Modern:
		data, _ := json.Marshal(map[string]any{
			"elicitations": []map[string]string{{"mode": "url", "elicitationId": id, "url": link, "message": msg}},
			"origin":       "mcp-proxy",
			"upstream":     upstream,
		})
		ref.Err = &jsonrpc.Error{Code: mcp.CodeURLElicitationRequired, Message: msg, Data: data}
	case url && routed:
		ref.Result, _ = json.Marshal(map[string]any{
			"resultType": mcp.ResultTypeInputRequired,
			"inputRequests": map[string]any{authorizeKey: map[string]any{
				"method": mcp.MethodElicitationCreate,
				"params": map[string]string{"mode": "url", "message": msg, "url": link},
			}},
		})
	case call.Method == mcp.MethodToolsCall:
		ref.Result, _ = json.Marshal(map[string]any{
			"content": []map[string]string{{"type": "text", "text": msg}},
			"isError": true,
		})
	default:
		ref.Err = mcp.ProxyError(mcp.CodeCredentialUnavailable, upstream, msg)
	}
	return ref
}

// stripOwnInput removes the proxy's own entry from a retry's inputResponses (the
// answer to the input request authorizationRequired made): the upstream never asked
// for it. params come back unchanged when there is none.
func stripOwnInput(params json.RawMessage) json.RawMessage {
	resp, ok, err := jsonx.Get(params, "inputResponses")
	if err != nil || !ok {
		return params
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(resp, &m) != nil {
		return params
	}
	if _, mine := m[authorizeKey]; !mine {
		return params
	}
	delete(m, authorizeKey)
	if len(m) == 0 {
		if out, err := jsonx.Delete(params, "inputResponses"); err == nil {
			return out
		}
		return params
	}
	b, err := jsonx.Marshal(m)
	if err != nil {
		return params
	}
	if out, err := jsonx.Set(params, "inputResponses", b); err == nil {
		return out
	}
	return params
}

// unavailable is the refusal of a principal without a usable credential (and no way to
// get one by approving).
func unavailable(upstream, format string, args ...any) *Refusal {
	msg := fmt.Sprintf("upstream %q: ", upstream) + fmt.Sprintf(format, args...)
	return &Refusal{Err: mcp.ProxyError(mcp.CodeCredentialUnavailable, upstream, msg), Cause: errors.New(msg)}
}

// failed is the refusal of a call whose credential could not be obtained (an exchange
// refused, a refresh failed, the store unreachable). cause never holds a token.
func failed(upstream string, cause error) *Refusal {
	msg := fmt.Sprintf("upstream %q: obtaining the principal's credential failed: %v", upstream, cause)
	return &Refusal{Err: mcp.ProxyError(mcp.CodeCredentialFailed, upstream, msg), Cause: errors.New(msg)}
}
