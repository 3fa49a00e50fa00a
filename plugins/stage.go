package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// hooked reports whether a routed method has request hooks: calls, prompts, reads.
func hooked(method string) bool {
	switch method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
		return true
	}
	return false
}

// applies decides on the proxy's side, without crossing to the plugin, whether the
// plugin's request hooks see a call. It allocates nothing.
func (in *instance) applies(call *router.Call) bool {
	if !hooked(call.Method) || call.Target == nil {
		return false
	}
	it := policy.ItemOf(call.Target)
	return in.sel.Selects(call.Request.Principal, &it)
}

// stage is the plugin as a middleware of the router's chain: its before hook on the way
// upstream, its after hook on the way back. Calls it does not select pass straight on,
// with no goroutine, allocation or lock. A selected call crosses to the plugin on a
// goroutine of its own: a hook may take up to its timeout, and neither the client's
// reader nor the upstream's may wait for it.
func (in *instance) stage(next router.Handler) router.Handler {
	if in.hooks&(hookBefore|hookAfter) == 0 {
		return next
	}
	return func(ctx context.Context, call *router.Call, reply router.Reply) {
		if !in.applies(call) {
			next(ctx, call, reply)
			return
		}
		in.calls.enter() // until answered: a host a reload replaced stops after its last call
		answer := func(res json.RawMessage, err error) {
			reply(res, err)
			in.calls.leave()
		}
		in.pool.run(func() { in.serve(ctx, call, next, answer) })
	}
}

func (in *instance) serve(ctx context.Context, call *router.Call, next router.Handler, reply router.Reply) {
	pc := in.callOf(call)
	rec := policy.RecordOf(ctx)
	if in.hooks&hookBefore != 0 {
		start := time.Now()
		resp, err := invoke(ctx, in, func(ctx context.Context, l *live) (*pb.BeforeResponse, error) {
			ans, err := l.call(ctx, &pb.HookCall{Hook: &pb.HookCall_Before{Before: &pb.BeforeRequest{Call: pc}}})
			if err != nil {
				return nil, err
			}
			if r := ans.GetBefore(); r != nil {
				return r, nil
			}
			return nil, errors.New("it answered a before hook call with something else")
		})
		if err == nil {
			err = checkBefore(call.Method, resp)
		}
		if ctx.Err() == nil {
			in.observe(HookBefore, start, err)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			reply(nil, router.ErrCancelled)
			return
		case err != nil:
			if !in.failed(ctx, rec, "before", err, call) {
				reply(nil, in.failure())
				return
			}
		case resp.Action == pb.BeforeResponse_DENY:
			in.note(rec, "before", "deny", resp.Notes, "")
			if rec != nil {
				rec.Decision, rec.Outcome, rec.Rule, rec.Error = "deny", policy.OutcomeDenied, "plugin:"+in.spec.Name, resp.Message
			}
			reply(nil, in.proxyError(mcp.CodePluginDenied, "mcp-proxy plugin "+in.spec.Name+": "+resp.Message))
			return
		case resp.Action == pb.BeforeResponse_REWRITE:
			params, err := jsonx.Set(call.Params, "arguments", resp.Arguments)
			if err != nil {
				if !in.failed(ctx, rec, "before", fmt.Errorf("its arguments cannot replace the call's: %w", err), call) {
					reply(nil, in.failure())
					return
				}
				break
			}
			in.note(rec, "before", "rewrite", resp.Notes, "")
			call = call.WithParams(params) // a new call built from the inbound one
			pc.Arguments = resp.Arguments
		default:
			in.note(rec, "before", "allow", resp.Notes, "")
		}
	}
	if in.hooks&hookAfter == 0 {
		next(ctx, call, reply)
		return
	}
	next(ctx, call, func(res json.RawMessage, err error) {
		var je *jsonrpc.Error
		if err != nil && !errors.As(err, &je) {
			reply(res, err) // cancelled, or not an answer the hook can see
			return
		}
		in.pool.run(func() { in.after(ctx, call.Method, pc, rec, res, je, reply) })
	})
}

func (in *instance) after(ctx context.Context, method string, pc *pb.Call, rec *policy.Record, res json.RawMessage, je *jsonrpc.Error, reply router.Reply) {
	req := &pb.AfterRequest{Call: pc, Result: res}
	var answer error
	if je != nil {
		req.Error = &pb.Error{Code: je.Code, Message: je.Message, Data: je.Data}
		answer = je
	}
	start := time.Now()
	resp, err := invoke(ctx, in, func(ctx context.Context, l *live) (*pb.AfterResponse, error) {
		ans, err := l.call(ctx, &pb.HookCall{Hook: &pb.HookCall_After{After: req}})
		if err != nil {
			return nil, err
		}
		if r := ans.GetAfter(); r != nil {
			return r, nil
		}
		return nil, errors.New("it answered an after hook call with something else")
	})
	var out json.RawMessage
	if err == nil {
		out, answer, err = in.applyAfter(method, res, answer, resp)
	}
	if ctx.Err() == nil {
		in.observe(HookAfter, start, err)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		reply(nil, router.ErrCancelled)
	case err != nil:
		if in.failed(ctx, rec, "after", err, nil) {
			reply(res, answerErr(je))
		} else {
			reply(nil, in.failure())
		}
	default:
		in.note(rec, "after", afterDecision(resp.Action), resp.Notes, "")
		reply(out, answer)
	}
}

// afterDecision names an after hook's action in the audit record.
func afterDecision(a pb.AfterResponse_Action) string {
	switch a {
	case pb.AfterResponse_REWRITE:
		return "rewrite"
	case pb.AfterResponse_ERROR:
		return "error"
	}
	return "keep"
}

// answerErr is je as an error, nil for none (not a typed nil).
func answerErr(je *jsonrpc.Error) error {
	if je == nil {
		return nil
	}
	return je
}

// applyAfter checks an after hook's answer and applies it to the upstream's.
func (in *instance) applyAfter(method string, res json.RawMessage, answer error, resp *pb.AfterResponse) (json.RawMessage, error, error) {
	switch resp.Action {
	case pb.AfterResponse_KEEP:
		return res, answer, nil
	case pb.AfterResponse_ERROR:
		if resp.Error == nil || resp.Error.Message == "" {
			return nil, nil, errors.New("its error has no message")
		}
		e := &jsonrpc.Error{Code: resp.Error.Code, Message: resp.Error.Message, Data: resp.Error.Data}
		if e.Code == 0 || e.Code <= -31000 && e.Code > -31100 {
			// The proxy's own codes say what the proxy did; a plugin's error is the plugin's.
			e.Code = mcp.CodePluginDenied
		}
		if len(e.Data) == 0 {
			e.Data = in.errorData()
		} else if jsonx.CheckUnique(e.Data) != nil {
			return nil, nil, errors.New("its error's data is not valid JSON")
		}
		return nil, e, nil
	case pb.AfterResponse_REWRITE:
		if answer != nil {
			return nil, nil, errors.New("it rewrote the result of a call that answered with an error")
		}
		out, err := mergeResult(method, res, resp.Result)
		if err != nil {
			return nil, nil, err
		}
		return out, nil, nil
	}
	return nil, nil, fmt.Errorf("unknown action %v", resp.Action)
}

// rewritable are the members of a result an after hook may replace, by method.
var rewritable = map[string][]string{
	mcp.MethodToolsCall:     {"content", "structuredContent", "isError", "_meta"},
	mcp.MethodPromptsGet:    {"messages", "description", "_meta"},
	mcp.MethodResourcesRead: {"contents", "_meta"},
}

// mergeResult is the upstream's result with the rewritable members taken from the
// plugin's (present: replaced; absent: removed); the rest stays the upstream's.
func mergeResult(method string, orig, repl json.RawMessage) (json.RawMessage, error) {
	var o, r map[string]json.RawMessage
	if err := jsonx.CheckUnique(repl); err != nil {
		return nil, fmt.Errorf("its result is not valid JSON: %w", err)
	}
	if err := json.Unmarshal(repl, &r); err != nil || r == nil {
		return nil, errors.New("its result is not a JSON object")
	}
	if err := json.Unmarshal(orig, &o); err != nil || o == nil {
		return nil, errors.New("the upstream's result is not a JSON object")
	}
	for _, k := range rewritable[method] {
		if v, ok := r[k]; ok {
			o[k] = v
		} else {
			delete(o, k)
		}
	}
	return jsonx.Marshal(o)
}

// checkBefore refuses a before hook's answer the proxy cannot apply.
func checkBefore(method string, resp *pb.BeforeResponse) error {
	switch resp.Action {
	case pb.BeforeResponse_ALLOW:
		return nil
	case pb.BeforeResponse_DENY:
		if resp.Message == "" {
			return errors.New("it denied the call without a message")
		}
		return nil
	case pb.BeforeResponse_REWRITE:
		if method == mcp.MethodResourcesRead {
			return errors.New("it rewrote the arguments of resources/read, which has none")
		}
		if err := jsonx.CheckUnique(resp.Arguments); err != nil {
			return fmt.Errorf("its arguments are not valid JSON: %w", err)
		}
		if v := bytes.TrimSpace(resp.Arguments); len(v) == 0 || v[0] != '{' {
			return errors.New("its arguments are not a JSON object")
		}
		return nil
	}
	return fmt.Errorf("unknown action %v", resp.Action)
}

// failed handles a hook that failed: logged (with the call's context, so that a traced
// call's line carries its trace id), noted, and the failure mode decides. It reports
// whether the call goes on (failure = "open").
func (in *instance) failed(ctx context.Context, rec *policy.Record, hook string, err error, call *router.Call) bool {
	ev := in.log.Warn().Ctx(ctx).Err(err).Str("hook", hook)
	if call != nil {
		ev = ev.Str("method", call.Method).Str("upstream", call.Target.Upstream).Str("name", call.Target.Name)
	}
	if in.spec.FailOpen {
		ev.Msg("plugin failed; the call goes on without it (failure = \"open\")")
		in.note(rec, hook, "failed_open", nil, err.Error())
		return true
	}
	ev.Msg("plugin failed; the call is refused (failure = \"closed\")")
	in.note(rec, hook, "failed_closed", nil, err.Error())
	if rec != nil && hook == "before" {
		rec.Decision, rec.Outcome, rec.Rule, rec.Error = "deny", policy.OutcomeProtocolError, "plugin:"+in.spec.Name, err.Error()
	}
	return false
}

// failure is the client's error for a failed plugin with failure = "closed". It names
// the plugin, not what went wrong inside it (the log says that).
func (in *instance) failure() error {
	return in.proxyError(mcp.CodePluginFailed, fmt.Sprintf("mcp-proxy plugin %s failed; the call was refused", in.spec.Name))
}

func (in *instance) proxyError(code int64, msg string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: code, Message: msg, Data: in.errorData()}
}

func (in *instance) errorData() json.RawMessage {
	data, _ := jsonx.Marshal(map[string]string{"origin": "mcp-proxy", "plugin": in.spec.Name})
	return data
}

func (in *instance) note(rec *policy.Record, hook, decision string, notes []byte, errText string) {
	if rec == nil {
		return
	}
	n := policy.PluginNote{Plugin: in.spec.Name, Hook: hook, Decision: decision, Error: errText}
	if len(notes) > 0 && jsonx.CheckUnique(notes) == nil {
		n.Notes = notes
	}
	rec.Plugins = append(rec.Plugins, n)
}

// callOf is the call as hooks see it: never the client's credentials.
func (in *instance) callOf(call *router.Call) *pb.Call {
	t, req := call.Target, call.Request
	pc := &pb.Call{Method: call.Method, Kind: kindOf(t.Kind, false), Upstream: t.Upstream, Name: t.Name, OriginalName: t.Original}
	if args, ok, _ := jsonx.Get(call.Params, "arguments"); ok && call.Method != mcp.MethodResourcesRead {
		pc.Arguments = args
	}
	if meta, ok, _ := jsonx.Get(call.Params, "_meta"); ok {
		pc.Meta = meta
	}
	if p := req.Principal; p != nil {
		pc.Principal = &pb.Principal{Name: p.Name, Groups: p.Groups}
	}
	if req.Meta != nil && len(req.Meta.Info) > 0 {
		pc.ClientName, _, _ = jsonx.GetString(req.Meta.Info, "name")
	}
	return pc
}

func kindOf(k router.TargetKind, template bool) pb.Kind {
	switch {
	case k == router.TargetTool:
		return pb.Kind_KIND_TOOL
	case k == router.TargetPrompt:
		return pb.Kind_KIND_PROMPT
	case template:
		return pb.Kind_KIND_RESOURCE_TEMPLATE
	}
	return pb.Kind_KIND_RESOURCE
}
