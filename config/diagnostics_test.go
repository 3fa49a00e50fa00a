package config

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
)

func TestFormatDiagnostics(t *testing.T) {
	subject := &hcl.Range{Filename: "f.hcl", Start: hcl.Pos{Line: 3, Column: 7, Byte: 20}, End: hcl.Pos{Line: 3, Column: 9, Byte: 22}}
	tests := []struct {
		name  string
		diags hcl.Diagnostics
		want  string
	}{
		{name: "none", diags: nil, want: ""},
		{
			name:  "with subject",
			diags: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Bad", Detail: "Very bad.", Subject: subject}},
			want:  "f.hcl:3:7: error: Bad; Very bad.\n",
		},
		{
			name:  "without subject",
			diags: hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Odd", Detail: "Hmm."}},
			want:  "warning: Odd; Hmm.\n",
		},
		{
			name:  "without detail",
			diags: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Bad", Subject: subject}},
			want:  "f.hcl:3:7: error: Bad\n",
		},
		{
			name:  "multi-line detail stays on one line",
			diags: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Bad", Detail: "one\ntwo\n  three"}},
			want:  "error: Bad; one two three\n",
		},
		{
			name:  "nil diagnostics are skipped",
			diags: hcl.Diagnostics{nil, {Severity: hcl.DiagError, Summary: "Bad"}, nil},
			want:  "error: Bad\n",
		},
		{
			name: "one per line",
			diags: hcl.Diagnostics{
				{Severity: hcl.DiagError, Summary: "A", Subject: subject},
				{Severity: hcl.DiagError, Summary: "B"},
			},
			want: "f.hcl:3:7: error: A\nerror: B\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatDiagnostics(tt.diags); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
