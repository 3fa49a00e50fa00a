package search

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Limits on what is read of one inputSchema, so that a huge or hostile schema costs a
// bounded amount at build time (and nothing at query time).
const (
	maxSchemaDepth  = 4    // nesting of properties / items / anyOf read
	maxSchemaProps  = 200  // properties read in all
	maxSchemaText   = 8192 // bytes of parameter descriptions read
	maxEnumValues   = 32   // enum values read per property
	maxEnumValueLen = 64   // longer enum values are skipped (they are not words)
)

// schemaNode is the part of a JSON Schema the index reads.
type schemaNode struct {
	Properties  map[string]json.RawMessage `json:"properties"`
	Items       json.RawMessage            `json:"items"`
	AnyOf       []json.RawMessage          `json:"anyOf"`
	OneOf       []json.RawMessage          `json:"oneOf"`
	AllOf       []json.RawMessage          `json:"allOf"`
	Description string                     `json:"description"`
	Title       string                     `json:"title"`
	Enum        []json.RawMessage          `json:"enum"`
}

// params reads an inputSchema's parameter names (nested objects' and arrays' items'
// too, to maxSchemaDepth) and their titles, descriptions and string enum values. Names
// are returned in a stable order (sorted at each level) so that the analysis of one
// schema is always the same. A schema that is not an object, or not JSON, has none.
func params(schema json.RawMessage) (names, texts string) {
	if len(schema) == 0 {
		return "", ""
	}
	var nb, tb strings.Builder
	count := 0
	var walk func(raw json.RawMessage, depth int)
	walk = func(raw json.RawMessage, depth int) {
		if depth > maxSchemaDepth || count >= maxSchemaProps || len(raw) == 0 || raw[0] != '{' {
			return
		}
		var n schemaNode
		if json.Unmarshal(raw, &n) != nil {
			return
		}
		keys := make([]string, 0, len(n.Properties))
		for k := range n.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if count >= maxSchemaProps {
				return
			}
			count++
			nb.WriteString(k)
			nb.WriteByte(' ')
			var p schemaNode
			if json.Unmarshal(n.Properties[k], &p) == nil {
				addText(&tb, p.Title)
				addText(&tb, p.Description)
				for i, e := range p.Enum {
					if i >= maxEnumValues {
						break
					}
					var s string
					if len(e) <= maxEnumValueLen+2 && json.Unmarshal(e, &s) == nil {
						addText(&tb, s)
					}
				}
			}
			walk(n.Properties[k], depth+1)
		}
		walk(n.Items, depth+1)
		for _, list := range [][]json.RawMessage{n.AnyOf, n.OneOf, n.AllOf} {
			for _, sub := range list {
				walk(sub, depth+1)
			}
		}
	}
	walk(schema, 0)
	return nb.String(), tb.String()
}

func addText(b *strings.Builder, s string) {
	if s == "" || b.Len() >= maxSchemaText {
		return
	}
	if room := maxSchemaText - b.Len(); len(s) > room {
		s = s[:room]
	}
	b.WriteString(s)
	b.WriteString(" . ")
}

// DocFromTool makes a Doc of one tool definition as a tools/list result lists it:
// name, title (or annotations.title), description and inputSchema are read; Raw is the
// definition itself. namespace, when not empty, is the part of the name before the
// separator (see Doc.Namespace).
func DocFromTool(raw json.RawMessage, namespace string) (Doc, error) {
	var t struct {
		Name        string          `json:"name"`
		Title       string          `json:"title"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations struct {
			Title string `json:"title"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return Doc{}, fmt.Errorf("reading a tool definition: %w", err)
	}
	if t.Name == "" {
		return Doc{}, fmt.Errorf("reading a tool definition: no name")
	}
	title := t.Title
	if title == "" {
		title = t.Annotations.Title
	}
	return Doc{
		Name:        t.Name,
		Namespace:   namespace,
		Title:       title,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Raw:         raw,
	}, nil
}

// DocFromPrompt makes a Doc of one prompt definition as a prompts/list result lists
// it: name, title and description as for a tool; its arguments' names and descriptions
// are read as a tool's parameters (InputSchema is made of them). Raw is the definition.
func DocFromPrompt(raw json.RawMessage, namespace string) (Doc, error) {
	var p struct {
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Arguments   []struct {
			Name        string `json:"name"`
			Title       string `json:"title"`
			Description string `json:"description"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return Doc{}, fmt.Errorf("reading a prompt definition: %w", err)
	}
	if p.Name == "" {
		return Doc{}, fmt.Errorf("reading a prompt definition: no name")
	}
	type prop struct {
		Title       string `json:"title,omitempty"`
		Description string `json:"description,omitempty"`
	}
	props := make(map[string]prop, len(p.Arguments))
	for _, a := range p.Arguments {
		props[a.Name] = prop{Title: a.Title, Description: a.Description}
	}
	schema, err := json.Marshal(map[string]any{"type": "object", "properties": props})
	if err != nil {
		return Doc{}, fmt.Errorf("reading a prompt definition: %w", err)
	}
	return Doc{
		Name:        p.Name,
		Namespace:   namespace,
		Title:       p.Title,
		Description: p.Description,
		InputSchema: schema,
		Raw:         raw,
	}, nil
}
