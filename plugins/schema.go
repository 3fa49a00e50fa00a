package plugins

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/mcp-proxy/mcp-proxy/internal/lazyre"
	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
)

var attrName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// schema is a plugin's config schema, compiled for hcldec.
type schema struct {
	spec  hcldec.ObjectSpec
	hcl   *hcl.BodySchema
	names []string
}

// compileSchema checks the schema a plugin described: a plugin that describes
// something the proxy cannot decode is refused at start, with what is wrong.
func compileSchema(attrs []*pb.Attribute) (*schema, error) {
	s := &schema{spec: hcldec.ObjectSpec{}, hcl: &hcl.BodySchema{}}
	for _, a := range attrs {
		if !attrName.MatchString(a.Name) {
			return nil, fmt.Errorf("config attribute name %q is not an HCL identifier", a.Name)
		}
		if _, dup := s.spec[a.Name]; dup {
			return nil, fmt.Errorf("config attribute %q is described twice", a.Name)
		}
		ty := cty.DynamicPseudoType
		if a.Type != "" {
			expr, diags := hclsyntax.ParseExpression([]byte(a.Type), "schema", hcl.InitialPos)
			if diags.HasErrors() {
				return nil, fmt.Errorf("config attribute %q: type %q: %s", a.Name, a.Type, diags.Error())
			}
			var tdiags hcl.Diagnostics
			if ty, tdiags = typeexpr.TypeConstraint(expr); tdiags.HasErrors() {
				return nil, fmt.Errorf("config attribute %q: type %q: %s", a.Name, a.Type, tdiags.Error())
			}
		}
		s.spec[a.Name] = &hcldec.AttrSpec{Name: a.Name, Type: ty, Required: a.Required}
		s.hcl.Attributes = append(s.hcl.Attributes, hcl.AttributeSchema{Name: a.Name, Required: a.Required})
		s.names = append(s.names, a.Name)
	}
	return s, nil
}

// decode decodes a config block (nil: none, the same as an empty one) against the
// schema into the JSON object Configure receives, and the ranges of its attributes for
// the plugin's own diagnostics. Unknown attributes and blocks, missing required ones and
// wrong types are diagnostics at their file:line, with suggestions for near misses.
func (s *schema) decode(body hcl.Body, ctx *hcl.EvalContext) ([]byte, map[string]hcl.Range, hcl.Diagnostics) {
	if body == nil {
		body = hcl.EmptyBody()
	}
	val, diags := hcldec.Decode(body, s.spec, ctx)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	ranges := map[string]hcl.Range{}
	if content, _, _ := body.PartialContent(s.hcl); content != nil {
		for name, a := range content.Attributes {
			ranges[name] = a.Range
		}
	}
	obj := map[string]cty.Value{}
	for it := val.ElementIterator(); it.Next(); {
		k, v := it.Element()
		if !v.IsNull() {
			obj[k.AsString()] = v
		}
	}
	js, err := ctyjson.SimpleJSONValue{Value: cty.ObjectVal(obj)}.MarshalJSON()
	if err != nil {
		return nil, nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid plugin configuration",
			Detail: fmt.Sprintf("encoding the configuration as JSON: %v", err), Subject: body.MissingItemRange().Ptr()})
	}
	return js, ranges, diags
}
