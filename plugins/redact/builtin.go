package redact

import (
	"bytes"
	"sort"
)

// Detector names a built-in detector and says in one line what it finds.
type Detector struct {
	Name        string
	Description string
}

// A builtin is a detector shipped with the package: a hand-written scanner.
type builtin struct {
	Detector
	minLen int                                        // the length of the shortest match
	find   func(s []byte, det int, dst []span) []span // appends the matches in s
}

// builtins lists the built-in detectors in priority order: when two detectors match the
// very same span, the one listed first names it (so a JWT sent as a bearer token is
// reported as a jwt). The table is never written after initialization.
var builtins = []builtin{
	{Detector{"private_key", "PEM private key blocks (-----BEGIN … PRIVATE KEY----- through the matching END line), masked whole"}, len("-----BEGIN PRIVATE KEY-----"), findPEM},
	{Detector{"jwt", "JSON Web Tokens: three base64url segments whose header decodes to a JSON object with \"alg\" and whose payload decodes to a JSON object"}, minJWT, findJWT},
	{Detector{"aws_access_key", "AWS access key IDs: AKIA or ASIA and 16 upper-case letters or digits"}, awsAccessKey.minLen(), awsAccessKey.find},
	{Detector{"aws_secret_key", "AWS secret access keys: 40 base64 characters of mixed case, on the same line as and shortly after the word \"aws\" or \"secret\""}, minAWSSecret, findAWSSecret},
	{Detector{"github_token", "GitHub tokens: ghp_, gho_, ghu_, ghs_, ghr_ and 36 or more letters or digits; github_pat_ fine-grained tokens"}, githubClassic.minLen(), findGitHub},
	{Detector{"gitlab_token", "GitLab tokens: glpat- (and gldt-, glrt-, glptt-, glcbt-, glft-, gloas-, glimt-, glagent-, glsoat-, glffct-) and 20 or more characters"}, gitlab.minLen(), gitlab.find},
	{Detector{"slack_token", "Slack tokens: xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxe- (and xoxe.xoxp-) with 10 or more characters including a digit"}, slack.minLen(), slack.find},
	{Detector{"stripe_key", "Stripe secret and restricted keys: sk_live_, sk_test_, rk_live_, rk_test_ and 16 or more letters or digits"}, stripe.minLen(), stripe.find},
	{Detector{"anthropic_key", "Anthropic API keys: sk-ant- and 32 or more base64url characters"}, anthropic.minLen(), anthropic.find},
	{Detector{"openai_key", "OpenAI API keys: sk- (including sk-proj-, sk-svcacct-, sk-admin-) and 32 or more base64url characters of mixed case with a digit"}, openAI.minLen(), openAI.find},
	{Detector{"google_api_key", "Google API keys: AIza and 35 base64url characters"}, googleAPI.minLen(), googleAPI.find},
	{Detector{"npm_token", "npm access tokens: npm_ and 36 letters or digits"}, npmToken.minLen(), npmToken.find},
	{Detector{"credit_card", "payment card numbers: 13 to 19 digits, whole or in groups split by single spaces or dashes, of a known network's prefix and length, passing the Luhn check"}, 13, findCards},
	{Detector{"email", "e-mail addresses: local@domain with at least one dot in the domain and an alphabetic top-level domain"}, len("a@b.cd"), findEmails},
	{Detector{"bearer_token", "bearer tokens: the token (20 or more characters) after \"Bearer \", as in an Authorization header; the word Bearer is kept"}, len("Bearer ") + minBearer, findBearer},
}

// Detectors returns the built-in detectors, sorted by name.
func Detectors() []Detector {
	out := make([]Detector, len(builtins))
	for i, b := range builtins {
		out[i] = b.Detector
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// lookupBuiltin returns the index in builtins of the detector called name, or -1.
func lookupBuiltin(name string) int {
	for i, b := range builtins {
		if b.Name == name {
			return i
		}
	}
	return -1
}

// The token rules. AWS key IDs are upper case, so a lower-case neighbour makes them part
// of a longer word; the other vendors' bodies stop at their own class.
var (
	awsAccessKey = &prefixed{
		anchors: []*anchor{newAnchor("AKIA", "ASIA")},
		body:    clsUpperDigit, word: clsAlnum, min: 16, max: 16,
	}
	githubClassic = &prefixed{
		anchors: []*anchor{newAnchor("ghp_", "gho_", "ghu_", "ghs_", "ghr_")},
		body:    clsAlnum, word: clsWord, min: 36, max: 255,
	}
	githubFine = &prefixed{
		anchors: []*anchor{newAnchor("github_pat_")},
		body:    clsWord, word: clsWord, min: 36, max: 255,
	}
	gitlab = &prefixed{
		anchors: []*anchor{newAnchor("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "gloas-",
			"glimt-", "glagent-", "glsoat-", "glffct-")},
		body: clsGitLab, word: clsGitLab, min: 20, max: 255, trim: ".",
	}
	slack = &prefixed{
		anchors: []*anchor{newAnchor("xoxe.xoxp-", "xoxe.xoxb-", "xoxb-", "xoxp-", "xoxa-", "xoxr-",
			"xoxs-", "xoxe-")},
		body: clsSlack, word: clsB64URL, min: 10, max: 255, trim: "-",
		check: func(b []byte) bool { return has(b, clsDigit) },
	}
	stripe = &prefixed{
		anchors: []*anchor{newAnchor("sk_live_", "sk_test_", "rk_live_", "rk_test_")},
		body:    clsAlnum, word: clsWord, min: 16, max: 255,
	}
	anthropic = &prefixed{
		anchors: []*anchor{newAnchor("sk-ant-")},
		body:    clsB64URL, word: clsB64URL, min: 32,
	}
	openAI = &prefixed{
		anchors: []*anchor{newAnchor("sk-")},
		body:    clsB64URL, word: clsB64URL, min: 32,
		check: func(b []byte) bool { return !bytes.HasPrefix(b, []byte("ant-")) && mixedCase(b) },
	}
	googleAPI = &prefixed{
		anchors: []*anchor{newAnchor("AIza")},
		body:    clsB64URL, word: clsB64URL, min: 35, max: 35,
	}
	npmToken = &prefixed{
		anchors: []*anchor{newAnchor("npm_")},
		body:    clsAlnum, word: clsWord, min: 36, max: 36,
	}
)

// findGitHub finds classic (ghp_ …) and fine-grained (github_pat_) GitHub tokens.
func findGitHub(s []byte, det int, dst []span) []span {
	return githubFine.find(s, det, githubClassic.find(s, det, dst))
}
