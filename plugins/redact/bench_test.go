package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchDoc returns a realistic tools/call result of about 2 KB: a text block with a
// shell session (a listing, a git log, a JSON response), a resource, and structured
// content. With secrets, it holds an e-mail address, an AWS key, a GitHub token, a card
// number and a JWT.
func benchDoc(secrets bool) string {
	email, akid, gh, card, jwt := "jane.doe@corp.example", "AKIAIOSFODNN7EXAMPLE", "ghp_"+tok(36), "4111 1111 1111 1111", jwtHS
	if !secrets {
		email, akid, gh, card, jwt = "jane.doe (corp)", "AKIA-not-a-key", "ghp-none", "order 20240115-0042", "eyJ-none"
	}
	text := strings.Join([]string{
		"$ ls -la /srv/app",
		"total 48",
		"drwxr-xr-x  6 app app 4096 Jan 15 10:42 .",
		"-rw-r--r--  1 app app 1893 Jan 15 10:40 config.yaml",
		"-rw-r--r--  1 app app  612 Jan 14 18:02 README.md",
		"drwxr-xr-x  2 app app 4096 Jan 12 09:13 scripts",
		"drwxr-xr-x  4 app app 4096 Jan 12 09:13 src",
		"-rw-r--r--  1 app app 8211 Jan 15 10:41 go.sum",
		"$ git log --oneline -3",
		"9f2c1e7 Fix retry loop in the upload worker (#412)",
		"4b8d0a2 Bump dependencies; regenerate lock file",
		"7c0e4f1 Log the upload id and size at debug level, not info",
		"e51a9c3 Author: " + email,
		"$ cat config.yaml",
		"region: eu-west-1",
		"access_key_id: " + akid,
		"upload:",
		"  bucket: app-uploads-prod",
		"  max_size_mb: 250",
		"  token: " + gh,
		"$ curl -s https://api.example.com/v1/orders/42",
		`{"id":42,"status":"paid","amount":129.99,"currency":"EUR","payment":{"card":"` + card + `"},"session":"` + jwt + `"}`,
		"$ tail -n 4 /var/log/app/worker.log",
		"2024-01-15T10:41:58.112Z INFO  upload started id=7f3a9c size=18273645 part_size=8388608",
		"2024-01-15T10:41:59.804Z WARN  part 2 failed: connection reset by peer; retrying in 400ms",
		"2024-01-15T10:42:00.377Z INFO  part 2 uploaded after 1 retry (attempt=2, elapsed=573ms)",
		"2024-01-15T10:42:01.020Z INFO  upload complete id=7f3a9c parts=3 checksum=sha256:9b1d4e6f0a2c",
		"3 files changed, 57 insertions(+), 12 deletions(-)",
	}, "\n")
	doc := map[string]any{
		"content": []any{
			map[string]any{"type": "text", "text": text},
			map[string]any{"type": "resource", "resource": map[string]any{
				"uri": "file:///srv/app/README.md", "mimeType": "text/markdown",
				"text": "# app\n\nUploads files to S3 with retries and exponential backoff.\nRun `make test` before pushing; see CONTRIBUTING.md for the review process.\n",
			}},
		},
		"structuredContent": map[string]any{
			"exitCode": 0, "durationMs": 1834, "cwd": "/srv/app",
			"files":  []any{"config.yaml", "README.md", "scripts/deploy.sh", "scripts/migrate.sql"},
			"author": email,
		},
		"isError": false,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func BenchmarkJSON(b *testing.B) {
	r := mustNew(b, Config{})
	for _, bc := range []struct {
		name    string
		secrets bool
	}{{"clean", false}, {"secrets", true}} {
		doc := []byte(benchDoc(bc.secrets))
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := r.JSON(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkString(b *testing.B) {
	r := mustNew(b, Config{})
	var m map[string]any
	if err := json.Unmarshal([]byte(benchDoc(false)), &m); err != nil {
		b.Fatal(err)
	}
	text := m["content"].([]any)[0].(map[string]any)["text"].(string)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		r.String(text)
	}
}

func TestBenchDoc(t *testing.T) {
	r := mustNew(t, Config{})
	clean := benchDoc(false)
	if n := len(clean); n < 1800 || n > 2400 {
		t.Errorf("clean document is %d bytes, want about 2 KB", n)
	}
	if _, counts, err := r.JSON([]byte(clean)); err != nil || counts != nil {
		t.Errorf("clean document: %v, %v", counts, err)
	}
	_, counts, err := r.JSON([]byte(benchDoc(true)))
	want := map[string]int{"email": 2, "aws_access_key": 1, "github_token": 1, "credit_card": 1, "jwt": 1}
	if err != nil || !equalCounts(counts, want) {
		t.Errorf("document with secrets: %v, %v; want %v", counts, err, want)
	}
}
