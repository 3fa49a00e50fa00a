package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hclBlock finds the HCL examples of a Markdown file: ```hcl fences.
var hclBlock = regexp.MustCompile("(?s)```hcl\n(.*?)```")

// envCall finds the variables an example reads with env("NAME").
var envCall = regexp.MustCompile(`env\("([A-Za-z_][A-Za-z0-9_]*)"`)

// TestDocsHCLExamplesValidate: every HCL example in README.md and docs/ is a complete
// configuration that `mcp-proxy validate` accepts, so the docs cannot drift from the
// code. An example without an upstream block (a listen or policy block shown alone) is
// checked with a minimal upstream added (a listen block shown alone, with an auth block); the variables its env() calls name are set.
func TestDocsHCLExamplesValidate(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append([]string{"../../README.md"}, files...)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range hclBlock.FindAllSubmatchIndex(b, -1) {
			src := string(b[m[2]:m[3]])
			line := 1 + bytes.Count(b[:m[2]], []byte("\n"))
			n++
			t.Run(filepath.Base(f)+"#"+string(rune('a'+i%26))+"_line"+itoa(line), func(t *testing.T) {
				validateExample(t, f, line, src)
			})
		}
	}
	if n == 0 {
		t.Fatal("no HCL examples found")
	}
}

// goBlock finds the Go code of a Markdown file: ```go fences.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// examplesOf names, for a page whose Go code is a package's runnable examples, the file
// that holds them.
var examplesOf = map[string]string{
	"embedding.md": "../../proxy/example_test.go",
}

// TestDocsGoExamplesAreTested: every Go block of a page in examplesOf is found, word for
// word, in that page's example file, which go test runs (with its // Output: checked);
// so the page's code compiles and does what it shows.
func TestDocsGoExamplesAreTested(t *testing.T) {
	for page, examples := range examplesOf {
		doc, err := os.ReadFile(filepath.Join("../../docs", page))
		if err != nil {
			t.Fatal(err)
		}
		code, err := os.ReadFile(examples)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlock.FindAllSubmatchIndex(doc, -1)
		if len(blocks) == 0 {
			t.Errorf("%s: no Go blocks", page)
		}
		for _, m := range blocks {
			if !bytes.Contains(code, doc[m[2]:m[3]]) {
				t.Errorf("docs/%s:%d: this Go block is not in %s word for word:\n%s", page,
					1+bytes.Count(doc[:m[2]], []byte("\n")), examples, doc[m[2]:m[3]])
			}
		}
	}
}

func validateExample(t *testing.T, file string, line int, src string) {
	t.Helper()
	if !strings.Contains(src, "upstream \"") {
		src += "\nupstream \"example\" {\n  command = [\"true\"]\n}\n"
	}
	if strings.Contains(src, "listen \"http\"") && !strings.Contains(src, "auth {") && !strings.Contains(src, "insecure_no_auth") {
		// A listen (or cluster) block shown alone: the auth block is another example's.
		src += "\nauth {\n  api_key \"example\" {\n    sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\n  }\n}\n"
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "example.hcl")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range envCall.FindAllStringSubmatch(src, -1) {
		t.Setenv(m[1], "example-value-0123456789abcdef-0123456789") // 32+ bytes: a cluster key must be
	}
	var stdout, stderr bytes.Buffer
	// The plugin programs of the examples are not built here: the file alone is checked.
	if err := run(context.Background(), []string{"validate", "--skip-plugins", "--config", p}, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Errorf("%s:%d: the example does not validate: %v\n%s\n--- example ---\n%s", file, line, err, stderr.String(), src)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
