package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// FormatDiagnostics renders diags one per line, in order, as
// "file:line:col: severity: summary; detail" so that editors and terminals can
// jump to the position. A diagnostic without a subject renders as
// "severity: summary; detail", and "; detail" is left out when there is no
// detail. Line breaks inside a message are folded into spaces so that each
// diagnostic stays on one line, and every line ends with a newline, the last
// one included, so that whatever is printed next starts on a line of its own.
// No diagnostics render as "".
func FormatDiagnostics(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		if d == nil {
			continue
		}
		if d.Subject != nil {
			fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		b.WriteString(severityName(d.Severity))
		b.WriteString(": ")
		b.WriteString(oneLine(d.Summary))
		if d.Detail != "" {
			b.WriteString("; ")
			b.WriteString(oneLine(d.Detail))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// severityName is the lower-case word for s used in FormatDiagnostics.
func severityName(s hcl.DiagnosticSeverity) string {
	switch s {
	case hcl.DiagError:
		return "error"
	case hcl.DiagWarning:
		return "warning"
	default:
		return "invalid"
	}
}

// oneLine folds the lines of s into one, separated by single spaces.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// position renders r's start as "file:line:col" for use inside a message.
func position(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// sortDiagnostics orders diags by file position so the output does not depend
// on map iteration inside HCL; diagnostics without a subject go last, and the
// sort is stable so equal positions keep the order they were found in.
func sortDiagnostics(diags hcl.Diagnostics) {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		switch {
		case a.Subject == nil && b.Subject == nil:
			return 0
		case a.Subject == nil:
			return 1
		case b.Subject == nil:
			return -1
		}
		return cmp.Or(
			cmp.Compare(a.Subject.Filename, b.Subject.Filename),
			cmp.Compare(a.Subject.Start.Byte, b.Subject.Start.Byte),
			cmp.Compare(a.Subject.End.Byte, b.Subject.End.Byte),
		)
	})
}

// sortedKeys returns m's keys in ascending order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
