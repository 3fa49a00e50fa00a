package trust

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Severity is how strongly a finding suggests a definition is aimed at the model.
type Severity int

// Severities, lowest first. Under screen = "withhold", medium and high findings withhold
// the item; a low one is reported only.
const (
	Low Severity = iota + 1
	Medium
	High
)

func (s Severity) String() string {
	switch s {
	case Low:
		return "low"
	case Medium:
		return "medium"
	case High:
		return "high"
	}
	return "unknown"
}

// MarshalText writes the severity's name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// The checks, by the name findings carry.
const (
	CheckUnicodeTags       = "unicode-tags"       // U+E0000–U+E007F: text invisible to people, read by models
	CheckBidiControl       = "bidi-control"       // embeddings, overrides and isolates that reorder text
	CheckZeroWidth         = "zero-width"         // zero-width and other invisible format characters
	CheckInstructionMarkup = "instruction-markup" // <IMPORTANT>, <system>, [INST], chat-template tokens, hidden comments
	CheckModelDirective    = "model-directive"    // phrases addressed to the model: hide from the user, ignore instructions
	CheckCredentialFile    = "credential-file"    // ~/.ssh, cloud and package-manager credentials, MCP client configs
	CheckCrossReference    = "cross-reference"    // names another upstream's tool (shadowing)
	CheckLongDescription   = "long-description"   // far longer than the upstream's other descriptions
)

// Finding is one check that matched a definition.
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Field    string   `json:"field"`  // where it matched, e.g. description or inputSchema.properties.x.description
	Detail   string   `json:"detail"` // what matched, printable (invisible characters as U+XXXX)
	// Accepted marks a finding of a check the configuration accepts for its item
	// (screen_allow): reported, never withholding.
	Accepted bool `json:"accepted,omitempty"`
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s (%s) in %s: %s", f.Check, f.Severity, f.Field, f.Detail)
	if f.Accepted {
		s += " [accepted]"
	}
	return s
}

// Withholds reports whether the finding withholds its item under screen = "withhold":
// a medium or high finding the configuration does not accept.
func (f Finding) Withholds() bool { return f.Severity >= Medium && !f.Accepted }

// screen runs the checks of one text that depend on its definition alone, appending
// its findings to out; refs, when not nil, collects the words of a value that may name
// tools (see refsOf). Most text is ASCII and is read in one pass (scanASCII); other text
// is lowered (strings.ToLower) and checked as it is.
func (sc *screener) screen(out []Finding, t *text, field fieldOf, refs *[]ref) []Finding {
	n := len(t.value)
	if t.ascii && n >= minScreened {
		if t.key && !hasAnchor(t.value) { // a key is checked for credential files only
			return out
		}
		return sc.scanASCII(out, t, field, refs)
	}
	if refs != nil && !t.key && n >= minRef {
		eachName(t.value, func(w string) { addRef(refs, w, t.node) })
	}
	if !t.ascii {
		out = screenUnicode(out, field.String(), t.value)
	}
	if n < minScreened {
		return out
	}
	lower := strings.ToLower(t.value)
	if !t.key { // property names carry credential files (full-schema poisoning), not phrases
		var hits uint64
		eachWord(lower, func(w string) { hits |= triggerMask(w) })
		hits |= markHits(lower, func(c byte) bool { return strings.IndexByte(lower, c) >= 0 })
		out = screenPhrases(out, hits, t.value, lower, field)
	}
	for i, c := range credentialFiles {
		if strings.Contains(lower, c) {
			return append(out, credentialFinding(i, field))
		}
	}
	return out
}

func credentialFinding(i int, field fieldOf) Finding {
	return Finding{Check: CheckCredentialFile, Severity: High, Field: field.String(), Detail: quoteExcerpt(credentialFiles[i])}
}

// fieldOf names where a text of the canonicaliser's last definition is, worked out only
// for a finding.
type fieldOf struct {
	c    *canonicaliser
	node int32
	key  bool
}

func (f fieldOf) String() string {
	s := f.c.pathOf(f.node)
	if f.key {
		s += " (a key)"
	}
	return s
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// screenPhrases runs the expressions of the phrases whose trigger words (a word of each
// group) or mark the text has: hits holds, per phrase, the groups met (see phraseBits).
// orig is the text, lower the text lowered ("" to lower it only when an expression runs).
func screenPhrases(out []Finding, hits uint64, orig, lower string, field fieldOf) []Finding {
	if hits == 0 {
		return out
	}
	for i, p := range phrases {
		if hits>>(phraseBits*i)&phraseMask != p.need() {
			continue
		}
		if lower == "" {
			lower = strings.ToLower(orig)
		}
		if loc := p.re.FindStringIndex(lower); loc != nil {
			m := lower[loc[0]:loc[1]]
			if len(lower) == len(orig) { // quote it as written when lowering kept the offsets
				m = orig[loc[0]:loc[1]]
			}
			out = append(out, Finding{Check: p.check, Severity: p.severity, Field: field.String(), Detail: quoteExcerpt(m)})
		}
	}
	return out
}

// markHits is the hits of the phrases whose mark s has; has reports whether s has a
// byte, to try only the marks whose first byte it has.
func markHits(s string, has func(byte) bool) uint64 {
	var hits uint64
	for i, p := range phrases {
		if p.mark != "" && has(p.mark[0]) && strings.Contains(s, p.mark) {
			hits |= 1 << (phraseBits * i)
		}
	}
	return hits
}

// minScreened is the shortest text the phrase and credential checks read: every pattern
// is longer ("id_rsa", "<system>").
const minScreened = 6

// eachWord calls fn with every run of ASCII letters and apostrophes in s (lower case).
func eachWord(s string, fn func(string)) {
	start := -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] == '\'') {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			fn(s[start:i])
			start = -1
		}
	}
}

// screenUnicode reports the invisible and reordering characters in s, one finding per
// check and field.
func screenUnicode(out []Finding, field, s string) []Finding {
	var tags, bidi, zw []rune
	var prev rune
	for _, r := range s {
		emojiJoin := r == 0x200D && isPictographic(prev)
		prev = r
		switch {
		case emojiJoin: // a zero-width joiner inside an emoji sequence (👩‍💻) is what it is for
		case r >= 0xE0000 && r <= 0xE007F:
			tags = append(tags, r)
		case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
			bidi = append(bidi, r)
		case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0x2061, r == 0x2062, r == 0x2063, r == 0x2064,
			r == 0xFEFF, r == 0x180E, r == 0x00AD, r >= 0xE0100 && r <= 0xE01EF, r == 0x115F, r == 0x1160, r == 0x3164:
			zw = append(zw, r)
		}
	}
	if len(tags) > 0 {
		out = append(out, Finding{Check: CheckUnicodeTags, Severity: High, Field: field, Detail: describeRunes(tags, true)})
	}
	if len(bidi) > 0 {
		out = append(out, Finding{Check: CheckBidiControl, Severity: High, Field: field, Detail: describeRunes(bidi, false)})
	}
	if len(zw) > 0 {
		out = append(out, Finding{Check: CheckZeroWidth, Severity: Medium, Field: field, Detail: describeRunes(zw, false)})
	}
	return out
}

// isPictographic approximates Unicode's Extended_Pictographic (and the modifiers and
// variation selector that end an emoji) for the zero-width joiner's neighbour.
func isPictographic(r rune) bool {
	return r >= 0x1F000 && r <= 0x1FAFF || r >= 0x2600 && r <= 0x27BF || r == 0xFE0F || r >= 0x1F3FB && r <= 0x1F3FF
}

// describeRunes names the characters found; for tag characters it also decodes the
// hidden ASCII text they spell, which is what the model would read.
func describeRunes(rs []rune, tags bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d character(s): ", len(rs))
	seen := map[rune]bool{}
	n := 0
	for _, r := range rs {
		if seen[r] || n == 6 {
			continue
		}
		seen[r] = true
		if n > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "U+%04X", r)
		n++
	}
	if tags {
		var hidden []byte
		for _, r := range rs {
			if c := r - 0xE0000; c >= 0x20 && c < 0x7F {
				hidden = append(hidden, byte(c))
			}
		}
		if len(hidden) > 0 {
			fmt.Fprintf(&b, "; hidden text %s", quoteExcerpt(string(hidden)))
		}
	}
	return b.String()
}

// phrase is one pattern of text addressed to the model. Its expression runs only on
// text that has one of its trigger words (or its mark): most text has none.
type phrase struct {
	check    string
	severity Severity
	words    []string // trigger words (whole words, lower case)
	re       *regexp.Regexp
	mark     string     // a trigger that is not a word ("<", "[inst"); "" for none
	also     [][]string // further words the text must have, one of each group
}

// need is the bits a phrase's text must have before its expression runs: bit 0 for its
// trigger words or mark, one more for each group of also.
func (p *phrase) need() uint64 { return uint64(2<<len(p.also)) - 1 }

// Each phrase has phraseBits bits of a hits word (so at most 64/phraseBits phrases, each
// with at most phraseBits-1 groups of further words).
const (
	phraseBits = 4
	phraseMask = 1<<phraseBits - 1
)

// users are the words for the person behind the client, a group of several phrases.
var users = []string{"user", "users", "human", "humans", "operator", "operators"}

var phrases = []*phrase{
	{CheckInstructionMarkup, High, nil,
		regexp.MustCompile(`<\s*/?\s*(important|system|instructions?|secret|hidden|critical|admin|assistant|user_instructions?|sysprompt)\b[^>]{0,40}>`), "<", nil},
	{CheckInstructionMarkup, High, nil,
		regexp.MustCompile(`\[/?(inst|system)\]`), "[", nil},
	{CheckInstructionMarkup, High, nil,
		regexp.MustCompile(`<\|[a-z_]{2,20}\|>`), "<|", nil},
	{CheckInstructionMarkup, Medium, nil,
		regexp.MustCompile(`<!--[\s\S]{0,60}`), "<!--", nil},
	{CheckModelDirective, High, []string{"ignore", "disregard", "forget"},
		regexp.MustCompile(`(ignore|disregard|forget)\s+(all\s+|any\s+|the\s+)?(previous|prior|above|earlier|preceding|other|your)\s+(instructions|prompts|rules|directions)`), "", [][]string{{"instructions", "prompts", "rules", "directions"}}},
	{CheckModelDirective, High, []string{"not", "don't", "never"},
		regexp.MustCompile(`(do\s+not|don't|never|must\s+not|should\s+not)\s+(tell|inform|mention|reveal|disclose|show|notify|alert|warn)\b[^.\n]{0,60}\b(user|human|operator)s?\b`), "", [][]string{{"tell", "inform", "mention", "reveal", "disclose", "show", "notify", "alert", "warn"}, users}},
	{CheckModelDirective, High, []string{"without"},
		regexp.MustCompile(`without\s+(telling|informing|notifying|alerting|asking|warning)\s+(the\s+)?(user|human|operator)`), "", [][]string{{"telling", "informing", "notifying", "alerting", "asking", "warning"}}},
	{CheckModelDirective, High, []string{"know", "see", "notice", "told", "find", "aware"},
		regexp.MustCompile(`(user|human|operator)s?\s+(must|should|will|may)\s+not\s+(know|see|notice|be\s+told|find\s+out|be\s+aware)`), "", [][]string{{"not"}, users}},
	{CheckModelDirective, High, []string{"prompt", "instructions", "message"},
		regexp.MustCompile(`(reveal|print|output|repeat|disclose|leak|send|include|pass)\b[^.\n]{0,40}(system\s+prompt|system\s+message|your\s+instructions)`), "", [][]string{{"reveal", "print", "output", "repeat", "disclose", "leak", "send", "include", "pass"}, {"system", "your"}}},
	{CheckModelDirective, High, []string{"send", "forward", "bcc", "redirect"},
		regexp.MustCompile(`(send|forward|bcc|redirect|copy)\s+(all|every|each|any)\b[^.\n]{0,40}\b(emails?|messages?|data|files?|requests?|calls?)\b[^.\n]{0,30}\bto\b`), "", [][]string{{"all", "every", "each", "any"}, {"to"}}},
	{CheckModelDirective, Medium, []string{"before", "whenever", "available", "present"},
		regexp.MustCompile(`(before\s+(using|calling|invoking|running)\s+(this|any|the|another)\s+tool|whenever\s+you\s+(use|call|run|execute|invoke)|when\s+this\s+tool\s+is\s+(available|present))[^.\n]{0,80}\b(read|send|include|pass|fetch|upload|must|always|prefix)\b`), "", [][]string{{"read", "send", "include", "pass", "fetch", "upload", "must", "always", "prefix"}}},
	{CheckModelDirective, Medium, []string{"recipient", "recipients", "destination", "receiver"},
		regexp.MustCompile(`(change|replace|set|switch)\s+the\s+(recipient|destination|receiver)s?\b[^.\n]{0,20}\bto\b`), "", [][]string{{"change", "replace", "set", "switch"}}},
}

// credentialFiles are paths and names whose mention in a definition means the model is
// being pointed at secrets. Lower case.
var credentialFiles = []string{
	"~/.ssh", ".ssh/", "id_rsa", "id_ed25519", "id_ecdsa", ".aws/credentials", ".netrc", ".npmrc", ".pypirc",
	".git-credentials", ".docker/config.json", ".kube/config", ".gnupg", "/etc/shadow", "mcp.json",
	"claude_desktop_config", ".config/gcloud", "credentials.json",
}

func quoteExcerpt(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func dedupe(fs []Finding) []Finding {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Check, b.Check)
	})
	return slices.CompactFunc(fs, func(a, b Finding) bool { return a.Field == b.Field && a.Check == b.Check })
}

// longDescription is how much longer than the median of an upstream's other
// descriptions (and than minLongDescription) a description must be to be reported.
const (
	longDescriptionFactor = 4
	minLongDescription    = 1000
	minItemsForMedian     = 4
)
