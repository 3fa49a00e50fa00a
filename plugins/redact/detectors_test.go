package redact

import (
	"encoding/base64"
	"strings"
	"testing"
)

// tok returns a deterministic token body of n characters that mixes upper case, lower
// case and digits, so test sources hold no real-looking secret literals.
func tok(n int) string {
	const alphabet = "aZ0bY1cX2dW3eV4fU5gT6hS7iR8jQ9kPlOmNnMoLpKqJrIsHtGuFvEwDxCyBzA"
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(alphabet[(i*7)%len(alphabet)])
	}
	return b.String()
}

// b64 returns the base64url (no padding) of s, for building JWTs.
func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

var (
	jwtHS  = b64(`{"alg":"HS256","typ":"JWT"}`) + "." + b64(`{"sub":"1234567890","name":"John Doe","iat":1516239022}`) + "." + tok(43)
	rsaPEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + tok(48) + "\n" + tok(64) + "\nabc" + tok(20) + "==\n-----END RSA PRIVATE KEY-----"
)

// A detectorCase is an input and the expected output of a Redactor with the one detector
// det; "<M>" in want stands for det's mask. want == "" means the input is unchanged.
type detectorCase struct {
	det, in, want string
}

var detectorCases = []detectorCase{
	// aws_access_key
	{"aws_access_key", "AKIAIOSFODNN7EXAMPLE", "<M>"},
	{"aws_access_key", "id=ASIAY34FZKBOKMUTVV7A;", "id=<M>;"},
	{"aws_access_key", `"AccessKeyId": "AKIAIOSFODNN7EXAMPLE"`, `"AccessKeyId": "<M>"`},
	{"aws_access_key", "AKIAIOSFODNN7EXAMPL", ""},   // 15
	{"aws_access_key", "AKIAIOSFODNN7EXAMPLEX", ""}, // 17
	{"aws_access_key", "xAKIAIOSFODNN7EXAMPLE", ""},
	{"aws_access_key", "AKIAIOSFODNN7EXAMPLEabc", ""},
	{"aws_access_key", "akiaiosfodnn7example", ""},
	{"aws_access_key", "AKIAiosfodnn7example", ""},
	{"aws_access_key", "ASIAPACIFIC_REGION_2024", ""},

	// aws_secret_key
	{"aws_secret_key", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=<M>"},
	{"aws_secret_key", `"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",`, `"SecretAccessKey": "<M>",`},
	{"aws_secret_key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nregion = x", "aws_secret_access_key = <M>\nregion = x"},
	{"aws_secret_key", "aws=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws=<M>"},
	{"aws_secret_key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""},                                      // no key word
	{"aws_secret_key", "token wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""},                                // no key word
	{"aws_secret_key", "aws_secret_access_key\nwJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""},               // key word on the line above
	{"aws_secret_key", "secret: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYx", ""},                             // 41
	{"aws_secret_key", "secret: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKE", ""},                               // 39
	{"aws_secret_key", "secret: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY=", ""},                             // longer base64
	{"aws_secret_key", "secret commit 0123456789abcdef0123456789abcdef01234567", ""},                        // hex digest
	{"aws_secret_key", "aws: " + strings.Repeat(".", 50) + " wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""}, // too far

	// github_token
	{"github_token", "ghp_" + tok(36), "<M>"},
	{"github_token", "token=gho_" + tok(40) + "&x=1", "token=<M>&x=1"},
	{"github_token", "https://ghs_" + tok(36) + ":x-oauth-basic@github.com/o/r", "https://<M>:x-oauth-basic@github.com/o/r"},
	{"github_token", "GITHUB_TOKEN=github_pat_11ABCDEFG0_" + tok(59), "GITHUB_TOKEN=<M>"},
	{"github_token", "ghp_" + tok(35), ""},
	{"github_token", "xghp_" + tok(36), ""},
	{"github_token", "ghp_" + tok(36) + "_suffix", ""},
	{"github_token", "ghx_" + tok(36), ""},
	{"github_token", "github_pat_example", ""},

	// gitlab_token
	{"gitlab_token", "glpat-" + tok(20), "<M>"},
	{"gitlab_token", "gldt-" + tok(20), "<M>"},
	{"gitlab_token", "token: glpat-" + tok(20) + ".", "token: <M>."},
	{"gitlab_token", "glpat-" + tok(27) + ".01.0w1x2y3z4", "<M>"},
	{"gitlab_token", "glrt-t1_" + tok(27), "<M>"},
	{"gitlab_token", "glpat-" + tok(19), ""},
	{"gitlab_token", "glpat-short", ""},
	{"gitlab_token", "xglpat-" + tok(20), ""},
	{"gitlab_token", "glzzz-" + tok(20), ""},

	// slack_token
	{"slack_token", "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy", "<M>"},
	{"slack_token", "token xoxp-1234567890-" + tok(24) + "-", "token <M>-"},
	{"slack_token", "xoxe.xoxp-1-" + tok(40), "<M>"},
	{"slack_token", "xoxb-not-a-real-token-here", ""}, // no digit: a placeholder
	{"slack_token", "xoxb-123", ""},
	{"slack_token", "xoxb-1234567890", "<M>"},
	{"slack_token", "xoxz-1234567890abcdef", ""},

	// stripe_key
	{"stripe_key", "sk_live_" + tok(24), "<M>"},
	{"stripe_key", "sk_test_" + tok(16), "<M>"},
	{"stripe_key", "key: rk_test_" + tok(99), "key: <M>"},
	{"stripe_key", "sk_live_" + tok(10), ""},
	{"stripe_key", "pk_live_" + tok(24), ""}, // publishable
	{"stripe_key", "task_live_" + tok(24), ""},

	// anthropic_key
	{"anthropic_key", "sk-ant-api03-" + tok(93) + "AA", "<M>"},
	{"anthropic_key", `"x-api-key": "sk-ant-admin01-` + tok(40) + `"`, `"x-api-key": "<M>"`},
	{"anthropic_key", "sk-ant-" + tok(20), ""},
	{"anthropic_key", "sk-ant-" + tok(32), "<M>"},
	{"anthropic_key", "sk-anthropic-sdk", ""},

	// openai_key
	{"openai_key", "sk-" + tok(48), "<M>"},
	{"openai_key", "OPENAI_API_KEY=sk-proj-" + tok(40) + "_" + tok(30) + "-" + tok(20), "OPENAI_API_KEY=<M>"},
	{"openai_key", "sk-ant-api03-" + tok(93), ""}, // Anthropic's
	{"openai_key", "sk-learn", ""},
	{"openai_key", "sk-some-long-kebab-case-identifier-name-here", ""},
	{"openai_key", "risk-" + tok(48), ""},
	{"openai_key", "task-" + tok(48), ""},
	{"openai_key", "sk-123e4567-e89b-12d3-a456-426614174000", ""}, // a UUID
	{"openai_key", "sk-" + tok(31), ""},
	{"openai_key", "sk-" + tok(32), "<M>"},

	// google_api_key
	{"google_api_key", "AIza" + tok(35), "<M>"},
	{"google_api_key", "?key=AIza" + tok(30) + "_-abc&q=1", "?key=<M>&q=1"},
	{"google_api_key", "AIza" + tok(34), ""},
	{"google_api_key", "AIza" + tok(36), ""},

	// npm_token
	{"npm_token", "npm_" + tok(36), "<M>"},
	{"npm_token", "//registry.npmjs.org/:_authToken=npm_" + tok(36) + "\n", "//registry.npmjs.org/:_authToken=<M>\n"},
	{"npm_token", "npm_" + tok(35), ""},
	{"npm_token", "npm_" + tok(37), ""},
	{"npm_token", "my_npm_" + tok(36), ""},

	// private_key
	{"private_key", "key:\n" + rsaPEM + "\nafter", "key:\n<M>\nafter"},
	{"private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + tok(40) + "\n-----END OPENSSH PRIVATE KEY-----\n", "<M>\n"},
	{"private_key", `{"key": "-----BEGIN PRIVATE KEY-----\nMIIEvQ` + tok(60) + `\n-----END PRIVATE KEY-----\n"}`, `{"key": "<M>\n"}`},
	{"private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF" + tok(60) + "\n=" + tok(4) + "\n-----END PGP PRIVATE KEY BLOCK-----", "<M>"},
	{"private_key", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123ABCD\n\nMIIE" + tok(60) + "\n" + tok(64) + "\n(output truncated)", "<M>\n(output truncated)"},
	{"private_key", "-----BEGIN EC PRIVATE KEY-----\r\nMHcC" + tok(60) + "\r\n" + tok(20) + "... 2 more lines", "<M>... 2 more lines"},
	{"private_key", "head -----BEGIN PRIVATE KEY----- and more", "head <M> and more"},
	{"private_key", "-----BEGIN PRIVATE KEY-----", "<M>"},
	{"private_key", "-----BEGIN CERTIFICATE-----\nMIIB" + tok(60) + "\n-----END CERTIFICATE-----", ""},
	{"private_key", "-----BEGIN PUBLIC KEY-----\nMIIB" + tok(60) + "\n-----END PUBLIC KEY-----", ""},
	{"private_key", "-----BEGIN private key-----", ""},

	// jwt
	{"jwt", jwtHS, "<M>"},
	{"jwt", b64(`{"alg":0}`) + "." + b64(`{"a":0}`) + ".", "<M>"},
	{"jwt", "Authorization: Bearer " + jwtHS, "Authorization: Bearer <M>"},
	{"jwt", "token=" + jwtHS + "&next=1", "token=<M>&next=1"},
	{"jwt", "t " + b64(`{"alg":"none"}`) + "." + b64(`{"sub":"1"}`) + ". end", "t <M> end"},
	{"jwt", b64(`{"typ":"JWT"}`) + "." + b64(`{"sub":"1"}`) + "." + tok(43), ""}, // no alg
	{"jwt", b64(`{"alg":"HS256"}`) + "." + b64(`{"notjson`) + "." + tok(43), ""}, // payload not JSON
	{"jwt", b64(`{"alg":"HS256"}`) + "." + b64(`["a","b"]`) + "." + tok(43), ""}, // payload not an object
	{"jwt", b64(`{"alg":"HS256"}`), ""},
	{"jwt", "x" + jwtHS, ""},
	{"jwt", "eyJ.eyJ.x", ""},

	// email
	{"email", "a@b.cd", "<M>"},
	{"email", "john.doe@example.com", "<M>"},
	{"email", "Mail me at a.b+tag@sub.example.co.uk.", "Mail me at <M>."},
	{"email", "<jane_o%x@example.org>", "<<M>>"},
	{"email", "JOHN@EXAMPLE.COM", "<M>"},
	{"email", "x@xn--bcher-kva.de, y@host.xn--p1ai", "<M>, <M>"},
	{"email", "mailto:a@b.io?subject=hi", "mailto:<M>?subject=hi"},
	{"email", "user@localhost", ""},
	{"email", "a@b", ""},
	{"email", "@app.route", ""},
	{"email", "git@github.com:org/repo.git", ""},
	{"email", "icon@2x.png logo@3x.WEBP", ""},
	{"email", "lodash@4.17.21", ""},
	{"email", "@types/node@18.x", ""},
	{"email", "foo@bar.c", ""},
	{"email", "foo@-bar.com", ""},
	{"email", "foo.@bar.com", ""},
	{"email", "foo@bar..com", ""},

	// credit_card
	{"credit_card", "4111111111111111", "<M>"},
	{"credit_card", "card: 4111 1111 1111 1111, exp 12/25", "card: <M>, exp 12/25"},
	{"credit_card", "4111-1111-1111-1111", "<M>"},
	{"credit_card", "5555555555554444", "<M>"},
	{"credit_card", "2223003122003222", "<M>"},
	{"credit_card", "378282246310005", "<M>"},
	{"credit_card", "3782 822463 10005", "<M>"},
	{"credit_card", "6011111111111117", "<M>"},
	{"credit_card", "3530111333300000", "<M>"},
	{"credit_card", "30569309025904", "<M>"},
	{"credit_card", "38520000023237", "<M>"},
	{"credit_card", "4222222222222", "<M>"},
	{"credit_card", "4111111111111111110", "<M>"},
	{"credit_card", "4111111111111111 12/25", "<M> 12/25"},
	{"credit_card", "4111 1111 1111 1111 123", "<M> 123"},
	{"credit_card", "(4111111111111111)", "(<M>)"},
	{"credit_card", "4111111111111112", ""}, // Luhn
	{"credit_card", "4111 1111 1111 1112", ""},
	{"credit_card", "9999999999999995", ""},  // Luhn-valid, no network
	{"credit_card", "17123456789016", ""},    // Luhn-valid, no network
	{"credit_card", "41111111111111111", ""}, // Visa has no 17-digit numbers
	{"credit_card", "14111111111111111", ""}, // inside a longer run
	{"credit_card", "41111111111111110000", ""},
	{"credit_card", "x4111111111111111", ""},
	{"credit_card", "4111111111111111_", ""},
	{"credit_card", "0.4111111111111111", ""},
	{"credit_card", "4111111111111111.5", ""},
	{"credit_card", "4111 1111-1111 1111", ""},  // mixed separators
	{"credit_card", "4111  1111 1111 1111", ""}, // double space
	{"credit_card", "1234-4111-1111-1111-1111", ""},
	{"credit_card", "4111111111", ""},

	// bearer_token
	{"bearer_token", "Bearer " + tok(20), "Bearer <M>"},
	{"bearer_token", "Authorization: Bearer " + tok(32), "Authorization: Bearer <M>"},
	{"bearer_token", "authorization: bearer " + tok(40) + "==", "authorization: bearer <M>"},
	{"bearer_token", `{"Authorization":"BEARER  ` + tok(20) + `"}`, `{"Authorization":"BEARER  <M>"}`},
	{"bearer_token", "use Bearer a.b-c_d~e+f/" + tok(20) + ".", "use Bearer <M>."},
	{"bearer_token", "Bearer short", ""},
	{"bearer_token", "Bearer authentication is a scheme", ""},
	{"bearer_token", "TorchBearer " + tok(30), ""},
	{"bearer_token", "Bearer\n" + tok(30), ""},
}

func TestDetectors(t *testing.T) {
	all, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range detectorCases {
		r, err := New(Config{Patterns: []string{tc.det}})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(tc.want, "<M>", "[REDACTED:"+tc.det+"]")
		if tc.want == "" {
			want = tc.in
		}
		got, counts := r.String(tc.in)
		if got != want {
			t.Errorf("%s: String(%q)\n got %q\nwant %q", tc.det, tc.in, got, want)
			continue
		}
		if n := strings.Count(tc.want, "<M>"); counts[tc.det] != n || len(counts) > 1 || (n == 0 && counts != nil) {
			t.Errorf("%s: String(%q) counts = %v, want %d", tc.det, tc.in, counts, n)
		}
		// With every detector, a positive is still found as the same detector (ties and
		// overlaps with other detectors aside, which the cases avoid), and the result is
		// a fixed point.
		gotAll, countsAll := all.String(tc.in)
		if tc.want != "" && countsAll[tc.det] == 0 && tc.det != "bearer_token" {
			t.Errorf("%s: with all detectors, String(%q) = %q, %v: %s not found", tc.det, tc.in, gotAll, countsAll, tc.det)
		}
		if again, c := all.String(gotAll); again != gotAll || c != nil {
			t.Errorf("%s: String is not idempotent on %q: %q then %q (%v)", tc.det, tc.in, gotAll, again, c)
		}
	}
}

// TestDetectorsCovered checks that every built-in has positive and negative cases.
func TestDetectorsCovered(t *testing.T) {
	pos, neg := map[string]int{}, map[string]int{}
	for _, tc := range detectorCases {
		if lookupBuiltin(tc.det) < 0 {
			t.Errorf("case for unknown detector %q", tc.det)
		}
		if tc.want == "" {
			neg[tc.det]++
		} else {
			pos[tc.det]++
		}
	}
	for _, d := range Detectors() {
		if pos[d.Name] == 0 || neg[d.Name] == 0 {
			t.Errorf("detector %s: %d positive and %d negative cases; want some of each", d.Name, pos[d.Name], neg[d.Name])
		}
	}
}

func TestDetectorsList(t *testing.T) {
	want := []string{"anthropic_key", "aws_access_key", "aws_secret_key", "bearer_token", "credit_card",
		"email", "github_token", "gitlab_token", "google_api_key", "jwt", "npm_token", "openai_key",
		"private_key", "slack_token", "stripe_key"}
	got := Detectors()
	if len(got) != len(want) {
		t.Fatalf("Detectors() has %d entries, want %d", len(got), len(want))
	}
	for i, d := range got {
		if d.Name != want[i] || d.Description == "" || strings.Contains(d.Description, "\n") {
			t.Errorf("Detectors()[%d] = %+v, want name %q and a one-line description", i, d, want[i])
		}
	}
}

// TestMinLen checks that each built-in's minLen is exact: some positive case is just
// that long (so the length gate that skips shorter text never skips a match).
func TestMinLen(t *testing.T) {
	for _, b := range builtins {
		shortest := -1
		for _, tc := range detectorCases {
			if tc.det == b.Name && tc.want != "" && (shortest < 0 || len(tc.in) < shortest) {
				shortest = len(tc.in)
			}
		}
		if shortest != b.minLen {
			t.Errorf("%s: minLen is %d, shortest positive case is %d bytes long", b.Name, b.minLen, shortest)
		}
	}
}

// TestNoFalsePositives runs every detector over ordinary tool output that holds no
// secret and no personal data.
func TestNoFalsePositives(t *testing.T) {
	r := mustNew(t, Config{})
	for _, s := range []string{
		"123e4567-e89b-12d3-a456-426614174000",
		"550E8400-E29B-41D4-A716-446655440000",
		"commit 9f2c1e7b4d0a2e51a9c3f6b8d7e0a1c2b3d4e5f6",
		"sha256:9b1d4e6f0a2c8e7d5b3a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c",
		"v1.2.3-rc.1+build.20240115, @scope/pkg@^4.17.21, node@18.x",
		"2024-01-15T10:41:58.112Z 1705315318112 1705315318112345 1705315318112345678",
		"10.0.0.1:8080 fe80::1 https://example.com/path?q=1#frag file:///srv/app/x.go:42:7",
		"pip install scikit-learn; sk-learn; task-runner; disk-usage; risk-assessment",
		"ghp_xxx is a placeholder; set GITHUB_TOKEN; npm_config_cache=/tmp",
		"user@localhost root@server git@github.com:org/repo.git icon@2x.png",
		"Bearer authentication uses tokens; see RFC 6750",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"amount 4111111111111112, order 1234567812345678, phone +1 555 123 4567",
		"price 0.4111111111111111 EUR, ratio 4111111111111111.5",
		"AKIA is a prefix; ASIA and AIza appear in docs",
		"eyJhbGciOiJIUzI1NiJ9 alone is only a header",
		"SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQgdGV4dC4gSXQgaXMgbm90IGEgc2VjcmV0Lg==",
	} {
		if got, counts := r.String(s); counts != nil {
			t.Errorf("String(%q) = %q, %v; want nothing masked", s, got, counts)
		}
	}
}
