package importer

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/mcp-proxy/mcp-proxy/internal/lazyre"
)

// render writes the configuration file: a header comment naming the sources and the
// environment variables it reads, then one upstream block per server, formatted as
// `hclwrite.Format` (that is, `terraform fmt`) formats HCL.
func render(srcs []Source, formats []Format, vars []Var, ups []*upstream, keepSecrets bool) []byte {
	var b strings.Builder
	b.WriteString("# mcp-proxy configuration written by `mcp-proxy import` from:\n")
	for _, s := range srcs {
		fmt.Fprintf(&b, "#   %s\n", comment(s.Path))
	}
	if len(vars) > 0 {
		b.WriteString("#\n# Environment variables it reads (set them where mcp-proxy runs")
		if !keepSecrets && hasSecret(vars) {
			b.WriteString("; the secrets of the\n# imported files were not copied: give their values there")
		}
		b.WriteString("):\n")
		width := 0
		for _, v := range vars {
			width = max(width, len(v.Name))
		}
		for _, v := range vars {
			fmt.Fprintf(&b, "#   %-*s  %s\n", width, v.Name, comment(v.describe()))
		}
	}
	for _, u := range ups {
		b.WriteString("\n")
		u.write(&b)
	}
	return hclwrite.Format([]byte(b.String()))
}

func hasSecret(vars []Var) bool {
	for _, v := range vars {
		if v.Secret {
			return true
		}
	}
	return false
}

// describe says what a variable stands for and where it is read, on one line.
func (v Var) describe() string {
	var what []string
	switch {
	case v.Input != nil:
		d := fmt.Sprintf("VS Code input %q", v.Input.ID)
		if v.Input.Description != "" {
			d += fmt.Sprintf(" (%s)", v.Input.Description)
		}
		what = append(what, d)
	case v.Secret:
		what = append(what, "secret, not copied")
	}
	if v.Optional {
		what = append(what, "optional")
	}
	s := strings.Join(v.Uses, ", ")
	if len(what) > 0 {
		s = strings.Join(what, ", ") + ": " + s
	}
	return s
}

// write writes u's block.
func (u *upstream) write(b *strings.Builder) {
	fmt.Fprintf(b, "upstream %s {\n", quote(u.label))
	fmt.Fprintf(b, "  # %s\n", comment(u.origin))
	if u.url != nil {
		fmt.Fprintf(b, "  url = %s\n", u.url.hcl())
		if u.transport != "" {
			fmt.Fprintf(b, "  transport = %s\n", quote(u.transport))
		}
	} else {
		fmt.Fprintf(b, "  command = %s\n", list(u.command))
	}
	fmt.Fprintf(b, "  namespace = %s\n", quote(u.label))
	if u.cwd != nil {
		fmt.Fprintf(b, "  cwd = %s\n", u.cwd.hcl())
	}
	if u.disabled {
		b.WriteString("  disabled = true\n")
	}
	writeObject(b, "env", u.env)
	writeObject(b, "headers", u.headers)
	b.WriteString("}\n")
}

// list renders a list of values, one per line when it would be long.
func list(vs []value) string {
	items := make([]string, len(vs))
	n := 0
	for i, v := range vs {
		items[i] = v.hcl()
		n += len(items[i]) + 2
	}
	if n <= 90 {
		return "[" + strings.Join(items, ", ") + "]"
	}
	return "[\n    " + strings.Join(items, ",\n    ") + ",\n  ]"
}

// writeObject writes name = { key = value ... } with one member per line.
func writeObject(b *strings.Builder, name string, es []entry) {
	if len(es) == 0 {
		return
	}
	fmt.Fprintf(b, "  %s = {\n", name)
	for _, e := range es {
		fmt.Fprintf(b, "    %s = %s", objectKey(e.key), e.val.hcl())
		if e.comment != "" {
			fmt.Fprintf(b, " # %s", comment(e.comment))
		}
		b.WriteString("\n")
	}
	b.WriteString("  }\n")
}

var bareKey = lazyre.New(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// objectKey writes an object key bare when HCL reads it as that string, quoted otherwise.
func objectKey(k string) string {
	if bareKey.MatchString(k) && k != "true" && k != "false" && k != "null" {
		return k
	}
	return quote(k)
}

// comment makes s safe on a comment line: no line breaks or other control characters.
func comment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}
