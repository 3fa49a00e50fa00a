// Package policy is the proxy's policy: allow/deny rules over tools, prompts and
// resources, rate and concurrency limits, and the audit trail. It plugs into the router
// twice: as a router.Guard that decides what each principal sees in lists, and as
// middleware stages (Chain.Stages: audit, rules, limits) that every routed request
// passes, so a principal never sees, nor reaches by any route, what it may not use.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"golang.org/x/text/unicode/norm"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// Kind is what a rule or item is about.
type Kind uint8

const (
	KindTool Kind = 1 << iota
	KindPrompt
	KindResource // a resource URI, or a resource template
	AllKinds     = KindTool | KindPrompt | KindResource
)

func (k Kind) String() string {
	switch k {
	case KindTool:
		return "tool"
	case KindPrompt:
		return "prompt"
	case KindResource:
		return "resource"
	}
	return "item"
}

// Item is one thing a principal may use: a tool or prompt by exposed name, a resource by
// URI (or a template by its URI template).
type Item struct {
	Kind     Kind
	Name     string          // exposed name, URI or URI template
	Upstream string          // the owning upstream's configured name
	Raw      json.RawMessage // the item as listed (a tool's annotations are read from it)
	// Aliases are other spellings of a resource's URI (the original of a rewritten URI,
	// normal forms): a resource pattern matches the item when it matches any of them.
	Aliases []string
	// Endpoint is the endpoint the request came through; "" for none (the listen path,
	// stdio without --endpoint), which rules name DefaultEndpoint.
	Endpoint string
	// Proxy marks a tool the proxy serves itself (an endpoint's search_tools): only the
	// rules and limits whose tools patterns select it apply to it, and with no rule that
	// applies it is allowed, whatever the default (it answers from what the principal
	// may see and calls no upstream).
	Proxy bool
}

// DefaultEndpoint is how a rule's endpoints name the proxy's own face: requests through
// no endpoint block.
const DefaultEndpoint = "default"

// Rule is one allow or deny rule, as configured. Empty matchers match everything; the
// kinds a rule is about are those whose pattern list is set (all when none is).
type Rule struct {
	Name       string
	Deny       bool // effect = "deny"; otherwise allow
	Tools      []string
	Prompts    []string
	Resources  []string
	Upstreams  []string
	Principals []string
	Groups     []string
	// Endpoints the request must come through (patterns over endpoint names;
	// DefaultEndpoint for none); nil: any.
	Endpoints []string
	// Annotations the tool must declare with these values (readOnlyHint = true, ...). A
	// tool that does not declare one counts as having the spec's default for it.
	Annotations map[string]bool
	// Condition is an expression over the call's arguments (args), the principal and
	// the item; nil for none. An error or a non-true result means the rule does not
	// apply for an allow rule, and applies for a deny rule: a failed check never allows.
	Condition hcl.Expression
}

// Decision is the outcome of the rules for one request.
type Decision struct {
	Allow  bool
	Rule   string // the rule that decided, "default" when none did
	Reason string // for the client and the audit trail
}

type compiledRule struct {
	Rule
	fast                      fastCond // the condition compiled to Go, when it can be
	kinds                     Kind
	tools, prompts, resources globs
	upstreams                 globs
	endpoints                 globs
	who                       who
}

// Engine evaluates rules; it is immutable and safe for concurrent use.
type Engine struct {
	rules        []compiledRule
	defaultAllow bool
	// argKeys are the top-level arguments conditions read (args.path → "path"); only
	// those are converted for evaluation. allArgs: some condition uses args as a whole.
	argKeys []string
	allArgs bool
	// Whether some condition reads principal or item (they are built only then).
	usesPrincipal, usesItem bool
}

// NewEngine compiles rules; defaultAllow decides when no rule matches.
func NewEngine(rules []Rule, defaultAllow bool) (*Engine, error) {
	e := &Engine{defaultAllow: defaultAllow}
	for _, r := range rules {
		c, err := compileMatchers(r)
		if err != nil {
			return nil, err
		}
		if r.Condition != nil {
			e.noteArgs(r.Condition)
			c.fast = compileFast(r.Condition)
		}
		e.rules = append(e.rules, c)
	}
	return e, nil
}

// compileMatchers compiles what selects a rule's items and principals (everything but
// its condition).
func compileMatchers(r Rule) (compiledRule, error) {
	c := compiledRule{Rule: r}
	var err error
	for _, set := range []struct {
		dst  *globs
		pats []string
		kind Kind
	}{{&c.tools, r.Tools, KindTool}, {&c.prompts, r.Prompts, KindPrompt}, {&c.resources, normalizedPatterns(r.Resources), KindResource},
		{&c.upstreams, r.Upstreams, 0}, {&c.endpoints, r.Endpoints, 0}} {
		if *set.dst, err = compileGlobs(set.pats); err != nil {
			return c, fmt.Errorf("rule %q: %v", r.Name, err)
		}
		if set.pats != nil {
			c.kinds |= set.kind
		}
	}
	if c.who, err = newWho(r.Principals, r.Groups); err != nil {
		return c, fmt.Errorf("rule %q: %v", r.Name, err)
	}
	if c.kinds == 0 {
		c.kinds = AllKinds
	}
	if len(r.Annotations) > 0 && r.Tools == nil {
		c.kinds &= KindTool // annotations only exist on tools
	}
	return c, nil
}

// normalizedPatterns adds to resource patterns their URI normal form (FILE:///Srv/%7Ex
// also as file:///Srv/~x), so that a pattern written in any spelling matches the normal
// forms the router gives rules. Patterns with glob escapes are kept as they are.
func normalizedPatterns(pats []string) []string {
	if pats == nil {
		return nil
	}
	out := slices.Clone(pats)
	for _, p := range pats {
		if strings.ContainsRune(p, '\\') {
			continue
		}
		if n, err := mcp.NormalizeURI(p); err == nil && n != p && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// noteArgs records which arguments a condition reads.
func (e *Engine) noteArgs(expr hcl.Expression) {
	for _, tr := range expr.Variables() {
		switch tr.RootName() {
		case "principal":
			e.usesPrincipal = true
		case "item":
			e.usesItem = true
		}
		if tr.RootName() != "args" {
			continue
		}
		if len(tr) < 2 {
			e.allArgs = true
			continue
		}
		var key string
		switch step := tr[1].(type) {
		case hcl.TraverseAttr:
			key = step.Name
		case hcl.TraverseIndex:
			if step.Key.Type() == cty.String {
				key = step.Key.AsString()
			}
		}
		if key == "" {
			e.allArgs = true
			continue
		}
		if !slices.Contains(e.argKeys, key) {
			e.argKeys = append(e.argKeys, key)
		}
	}
}

// applies reports whether the rule's matchers (everything but the condition) select it.
func (c *compiledRule) applies(p *principal.Principal, it *Item) bool {
	if c.kinds&it.Kind == 0 || !c.upstreams.match(it.Upstream) {
		return false
	}
	if it.Proxy && c.tools == nil {
		return false // a rule about the proxy's own tools names them
	}
	if c.endpoints != nil {
		ep := it.Endpoint
		if ep == "" {
			ep = DefaultEndpoint
		}
		if !c.endpoints.match(ep) {
			return false
		}
	}
	switch it.Kind {
	case KindTool:
		if !c.tools.match(it.Name) {
			return false
		}
	case KindPrompt:
		if !c.prompts.match(it.Name) {
			return false
		}
	case KindResource:
		if !c.resources.match(it.Name) && !slices.ContainsFunc(it.Aliases, c.resources.match) {
			return false
		}
	}
	if !c.who.matches(p) {
		return false
	}
	for name, want := range c.Annotations {
		if toolAnnotation(it.Raw, name) != want {
			return false
		}
	}
	return true
}

// toolAnnotation reads a boolean annotation of a tool, with the spec's defaults when the
// tool does not declare it (readOnlyHint false, destructiveHint true, idempotentHint
// false, openWorldHint true).
func toolAnnotation(raw json.RawMessage, name string) bool {
	if v, ok, _ := jsonx.Get(raw, "annotations"); ok {
		if b, ok, _ := jsonx.Get(v, name); ok {
			return string(b) == "true"
		}
	}
	switch name {
	case "destructiveHint", "openWorldHint":
		return true
	}
	return false
}

// Decide applies the rules to one request. Precedence: a matching deny rule wins over
// any allow rule; among rules of the same effect the first in the configuration names
// the decision; with no match the default decides.
func (e *Engine) Decide(p *principal.Principal, it *Item, args json.RawMessage) Decision {
	var allow *compiledRule
	var vars map[string]cty.Value
	var argsChecked bool
	var argsErr error
	for i := range e.rules {
		r := &e.rules[i]
		if !r.applies(p, it) {
			continue
		}
		if r.Condition != nil {
			if !argsChecked {
				argsChecked, argsErr = true, checkArgs(args)
			}
			if argsErr != nil {
				// A condition would see other arguments than the upstream reads: no
				// rule can decide on them, whatever try() or can() would say.
				return Decision{Rule: r.Name, Reason: fmt.Sprintf("the arguments cannot be checked by rule %q: %v", r.Name, argsErr)}
			}
			var ok bool
			var err error
			decided := false
			if r.fast != nil {
				ok, err, decided = r.fast(args)
			}
			if !decided {
				if vars == nil {
					vars = e.evalVars(p, it, args)
				}
				ok, err = evalCondition(r.Condition, vars)
			}
			if r.Deny {
				if ok || err != nil {
					reason := fmt.Sprintf("denied by rule %q", r.Name)
					if err != nil {
						reason += fmt.Sprintf(" (its condition could not be checked: %v)", err)
					}
					return Decision{Rule: r.Name, Reason: reason}
				}
				continue
			}
			if !ok {
				continue
			}
		} else if r.Deny {
			return Decision{Rule: r.Name, Reason: fmt.Sprintf("denied by rule %q", r.Name)}
		}
		if allow == nil {
			allow = r
		}
	}
	if allow != nil {
		return Decision{Allow: true, Rule: allow.Name}
	}
	if e.defaultAllow {
		return Decision{Allow: true, Rule: "default"}
	}
	if it.Proxy {
		return Decision{Allow: true, Rule: "none"} // the default is about the upstreams' tools
	}
	return Decision{Rule: "default", Reason: "no rule allows it (the default is deny)"}
}

// Visible reports whether a principal may see an item in lists: no unconditional deny
// rule matches it, and some allow rule (whatever its condition) or the default allows it.
func (e *Engine) Visible(p *principal.Principal, it *Item) bool {
	allowed := e.defaultAllow
	for i := range e.rules {
		r := &e.rules[i]
		if !r.applies(p, it) {
			continue
		}
		if r.Deny {
			if r.Condition == nil {
				return false
			}
			continue
		}
		allowed = true
	}
	return allowed
}

// Rules returns the number of rules.
func (e *Engine) Rules() int { return len(e.rules) }

// ConditionVariables are the roots a condition may use.
var ConditionVariables = []string{"args", "principal", "item"}

// conditionAttributes are the attributes of the roots that have a fixed set (args has
// the call's arguments): principal.identity is principal.ID ("api_key:alice"),
// principal.via how it was established (principal.ViaAPIKey, ...).
var conditionAttributes = map[string][]string{
	"principal": {"name", "identity", "via", "groups"},
	"item":      {"name", "upstream", "kind"},
}

// evalVars builds the variables of a condition: args holds the arguments conditions
// read (converted from JSON one by one, not the whole object), principal and item.
func (e *Engine) evalVars(p *principal.Principal, it *Item, args json.RawMessage) map[string]cty.Value {
	argv := cty.EmptyObjectVal
	if len(args) > 0 {
		if e.allArgs {
			argv = jsonToCty(args)
		} else if len(e.argKeys) > 0 {
			attrs := make(map[string]cty.Value, len(e.argKeys))
			for _, k := range e.argKeys {
				if raw, ok, _ := jsonx.Get(args, k); ok {
					attrs[k] = jsonToCty(raw)
				}
			}
			if len(attrs) > 0 {
				argv = cty.ObjectVal(attrs)
			}
		}
	}
	vars := map[string]cty.Value{"args": argv}
	if e.usesPrincipal {
		name, id, via, gv := "", "", "", cty.ListValEmpty(cty.String)
		if p != nil {
			name, id, via = p.Name, p.ID(), p.Via
			if len(p.Groups) > 0 {
				groups := make([]cty.Value, len(p.Groups))
				for i, g := range p.Groups {
					groups[i] = cty.StringVal(g)
				}
				gv = cty.ListVal(groups)
			}
		}
		vars["principal"] = cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(name), "groups": gv,
			"identity": cty.StringVal(id), "via": cty.StringVal(via)})
	}
	if e.usesItem {
		vars["item"] = cty.ObjectVal(map[string]cty.Value{
			"name": cty.StringVal(it.Name), "upstream": cty.StringVal(it.Upstream), "kind": cty.StringVal(it.Kind.String()),
		})
	}
	return vars
}

// checkArgs reports arguments that conditions could not see as the upstream reads them:
// HCL values hold strings in Unicode normal form C (cty normalizes "e\u0301" to "é", and
// the Kelvin sign to K, in values and in member names), and invalid UTF-8 decodes to
// U+FFFD; an upstream keeps them as they are. Plain ASCII without escapes (nearly every
// call) is accepted without decoding.
func checkArgs(args json.RawMessage) error {
	if len(args) == 0 {
		return nil
	}
	plain := true
	for _, c := range args {
		if c >= utf8.RuneSelf || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return nil
	}
	if !utf8.Valid(args) {
		return errors.New("they are not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if s, ok := tok.(string); ok {
			if strings.ContainsRune(s, utf8.RuneError) {
				return errors.New("a string holds an invalid or lone surrogate escape")
			}
			if !norm.NFC.IsNormalString(s) {
				return fmt.Errorf("the string %q is not in Unicode normal form C", s)
			}
		}
	}
}

// jsonToCty converts one JSON value, with fast paths for scalars.
func jsonToCty(raw json.RawMessage) cty.Value {
	if len(raw) == 0 {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	switch raw[0] {
	case '"':
		if s, err := jsonx.Unquote(raw); err == nil {
			return cty.StringVal(s)
		}
	case 't':
		return cty.True
	case 'f':
		return cty.False
	case 'n':
		return cty.NullVal(cty.DynamicPseudoType)
	case '{', '[':
		if ty, err := ctyjson.ImpliedType(raw); err == nil {
			if v, err := ctyjson.Unmarshal(raw, ty); err == nil {
				return v
			}
		}
	default:
		if v, err := cty.ParseNumberVal(string(raw)); err == nil {
			return v
		}
	}
	return cty.NullVal(cty.DynamicPseudoType)
}

func evalCondition(expr hcl.Expression, vars map[string]cty.Value) (bool, error) {
	ctx := &hcl.EvalContext{Variables: vars, Functions: Functions}
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		return false, fmt.Errorf("%s", diags.Errs()[0])
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.Bool {
		return false, fmt.Errorf("the condition is %s, not true or false", v.Type().FriendlyName())
	}
	return v.True(), nil
}

// Functions are what conditions may call.
var Functions = map[string]function.Function{
	"startswith": stringPredicate(strings.HasPrefix),
	"endswith":   stringPredicate(strings.HasSuffix),
	"contains":   stringPredicate(strings.Contains),
	"lower":      stdlib.LowerFunc,
	"upper":      stdlib.UpperFunc,
	"length":     lengthFunc,
	"regex":      stdlib.RegexFunc,
	"can":        tryfunc.CanFunc,
	"try":        tryfunc.TryFunc,
	"under":      underFunc,
}

func stringPredicate(f func(s, sub string) bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "s", Type: cty.String}, {Name: "sub", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

// lengthFunc is length(x): characters of a string, elements of a list, map or object.
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		if v.Type() == cty.String {
			return stdlib.Strlen(v)
		}
		return stdlib.Length(v)
	},
})

// underFunc is under(path, dir): whether a slash-separated path, once cleaned of "."
// and "..", is dir or inside it. A relative path is never under an absolute dir.
var underFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "path", Type: cty.String}, {Name: "dir", Type: cty.String}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.BoolVal(Under(args[0].AsString(), args[1].AsString())), nil
	},
})

// Under reports whether p is dir or below it, as a file system would resolve it. p is a
// slash-separated path or a file: URL (file:///srv/x, file://localhost/srv/x, file:/srv/x),
// whose path is percent-decoded first (%2e%2e is ".."); dir is a plain path. It is false,
// never an error, for what it cannot vouch for: a NUL or a backslash anywhere (a
// separator on Windows), a file: URL with another host, a query or fragment, or a bad
// escape, and any other URL.
func Under(p, dir string) bool {
	if strings.ContainsAny(p, "\x00\\") {
		return false
	}
	if len(p) >= 5 && strings.EqualFold(p[:5], "file:") {
		u, err := url.Parse(p)
		if err != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil ||
			(u.Host != "" && !strings.EqualFold(u.Host, "localhost")) {
			return false
		}
		p = u.Path // decoded
		if strings.ContainsAny(p, "\x00\\") {
			return false
		}
	} else if strings.Contains(p, "://") {
		return false
	}
	dir = path.Clean(dir)
	if path.IsAbs(dir) != path.IsAbs(p) {
		return false
	}
	p = path.Clean(p)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// CheckCondition reports what is wrong with a condition expression without evaluating
// it: unknown variables or functions.
func CheckCondition(expr hcl.Expression) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		if !slices.Contains(ConditionVariables, root) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unknown variable in condition",
				Detail:   fmt.Sprintf("A condition may use %s; there is no %q.", strings.Join(ConditionVariables, ", "), root),
				Subject:  tr.SourceRange().Ptr(),
			})
			continue
		}
		attrs := conditionAttributes[root]
		if attrs == nil || len(tr) < 2 {
			continue
		}
		if step, ok := tr[1].(hcl.TraverseAttr); ok && !slices.Contains(attrs, step.Name) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unknown attribute in condition",
				Detail:   fmt.Sprintf("%s has %s; there is no %q.", root, strings.Join(attrs, ", "), step.Name),
				Subject:  tr.SourceRange().Ptr(),
			})
		}
	}
	if se, ok := expr.(hclsyntax.Expression); ok {
		hclsyntax.VisitAll(se, func(n hclsyntax.Node) hcl.Diagnostics {
			if call, ok := n.(*hclsyntax.FunctionCallExpr); ok {
				if _, known := Functions[call.Name]; !known {
					names := make([]string, 0, len(Functions))
					for k := range Functions {
						names = append(names, k)
					}
					sort.Strings(names)
					diags = append(diags, &hcl.Diagnostic{
						Severity: hcl.DiagError,
						Summary:  "Unknown function in condition",
						Detail:   fmt.Sprintf("There is no function %q in conditions; there are %s.", call.Name, strings.Join(names, ", ")),
						Subject:  call.NameRange.Ptr(),
					})
				}
			}
			return nil
		})
	}
	return diags
}
