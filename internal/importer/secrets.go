package importer

import (
	"net/url"
	"strings"
	"unicode"

	"github.com/mcp-proxy/mcp-proxy/internal/lazyre"
)

// Secret detection. An imported file must never hold a credential the source file had
// in clear, so the rules lean towards calling a value secret: a false alarm costs the
// user one environment variable to set, a miss leaks a token into a file that gets
// shared. A value the rules call secret is written as env("NAME") instead.
//
//   - By name: an environment variable, header, URL query parameter or command-line
//     flag whose name contains one of secretWords (case-insensitive) holds a secret,
//     unless its value is plainly not one (see plainValue).
//   - By value: a value that starts with a well-known token prefix (tokenPrefixes), is
//     a JWT, or (environment variables and headers only) looks random: at least 20
//     characters of token alphabet mixing upper case, lower case and digits, or 32 hex
//     digits.
//   - A URL with a password in its user info (postgres://app:pw@db/app) is a secret,
//     wherever it is found.

// secretWords are the name fragments that mark a secret.
var secretWords = []string{"TOKEN", "SECRET", "KEY", "PASSWORD", "PASS", "PWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION"}

// secretName reports whether an environment variable, header, query parameter or flag
// named name holds a secret.
func secretName(name string) bool {
	up := strings.ToUpper(name)
	up = strings.ReplaceAll(up, "AUTHORIZATION", "AUTH")
	up = strings.ReplaceAll(up, "AUTHOR", "") // GIT_AUTHOR_NAME
	for _, w := range secretWords {
		if strings.Contains(up, w) {
			return true
		}
	}
	return false
}

// plainValue reports whether v, found under a secret-looking name, is plainly not a
// secret: empty, a boolean or on/off word, a number (MAX_TOKENS=4096), a file path
// (GOOGLE_APPLICATION_CREDENTIALS=/path/key.json: the file is the secret, not its
// name) or an http(s) URL without user info and query (AUTH_URL).
func plainValue(v string) bool {
	v = strings.TrimSpace(v)
	switch strings.ToLower(v) {
	case "", "true", "false", "yes", "no", "on", "off", "none", "null":
		return true
	}
	if strings.Trim(v, "0123456789") == "" {
		return true
	}
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, "~/") || strings.HasPrefix(v, "./") || strings.HasPrefix(v, "../") ||
		windowsPath.MatchString(v) {
		return !strings.ContainsAny(v, " \t")
	}
	if u, err := url.Parse(v); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return u.User == nil && u.RawQuery == "" && u.Fragment == ""
	}
	return false
}

var windowsPath = lazyre.New(`^[A-Za-z]:[\\/]`)

// tokenPrefixes start the tokens of well-known services: OpenAI and Anthropic (sk-),
// Stripe, GitHub, GitLab, Slack, AWS, Google, Hugging Face, npm, Shopify,
// DigitalOcean, Linear, Notion, SendGrid and others.
var tokenPrefixes = []string{
	"sk-", "sk_", "pk_live_", "rk_live_", "whsec_",
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
	"xoxb-", "xoxp-", "xoxa-", "xoxs-", "xapp-",
	"AKIA", "ASIA", "AIza", "ya29.",
	"hf_", "npm_", "shpat_", "shpss_", "dop_v1_", "lin_api_", "ntn_", "secret_", "SG.",
	"pat-", "xai-", "gsk_", "pplx-", "fw_", "r8_", "tvly-", "fc-", "ctx7sk-", "sntrys_",
}

var (
	tokenAlphabet = lazyre.New(`^[A-Za-z0-9_\-+/=.~]+$`)
	jwtLike       = lazyre.New(`^eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*$`)
	hexLike       = lazyre.New(`^[0-9a-fA-F]{32,}$`)
)

// prefixedToken reports whether v is a token of a well-known service or a JWT.
func prefixedToken(v string) bool {
	if jwtLike.MatchString(v) {
		return true
	}
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(v, p) && len(v) >= len(p)+10 && tokenAlphabet.MatchString(v) {
			return true
		}
	}
	return false
}

// randomToken reports whether v looks like a generated credential: a prefixed token,
// or 20+ characters of token alphabet that mix upper case, lower case and digits (as
// base62 and base64 keys do, and words, versions and model names do not), or 32+ hex
// digits. Paths and URLs are not tokens.
func randomToken(v string) bool {
	if prefixedToken(v) {
		return true
	}
	if len(v) < 20 || !tokenAlphabet.MatchString(v) || strings.HasPrefix(v, "/") || strings.HasPrefix(v, ".") {
		return false
	}
	if hexLike.MatchString(v) {
		return true
	}
	var upper, lower, digit bool
	for _, r := range v {
		upper = upper || unicode.IsUpper(r)
		lower = lower || unicode.IsLower(r)
		digit = digit || unicode.IsDigit(r)
	}
	return upper && lower && digit
}

// credential reports whether v, one word of a value found anywhere, is a credential:
// a random-looking token, or a URL with a password (postgres://app:pw@db/app).
func credential(v string) bool {
	return randomToken(v) || urlPassword(v)
}

// urlPassword reports whether v is a URL whose user info has a password.
func urlPassword(v string) bool {
	u, err := url.Parse(v)
	if err != nil || u.User == nil {
		return false
	}
	_, ok := u.User.Password()
	return ok
}

// authScheme matches the Authorization schemes Authorization schemes whose word is kept in the clear, so that
// "Bearer sk-…" becomes "Bearer ${env("…")}".
var authScheme = lazyre.New(`^(?i)(Bearer|Basic|Token|Bot|Digest|ApiKey)(\s+)(\S.*)$`)

// sensitiveHeader reports whether a header named name carries credentials.
func sensitiveHeader(name string) bool {
	switch strings.ToLower(name) {
	case "authorization", "proxy-authorization", "cookie":
		return true
	}
	return secretName(name)
}
