package router

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
)

// The services of a search-mode endpoint, named in search_tools' description: the model
// writes the query, and it writes a better one when it knows what the endpoint has
// ("github (GitHub MCP Server, 26 tools), memory (Knowledge Graph Memory Server, 9
// tools)"). What a principal reads is what it may see: an upstream all of whose tools
// are hidden from it is not named, and the counts are of the tools it sees. The
// services are found with the snapshot (servicesOf); the sentence is written once per
// endpoint and principal class, with the list it is part of (snapshot.view).

// service is one upstream of an endpoint's view that has tools in it.
type service struct {
	name  string   // how the model knows it: the namespace of its tools' names (the upstream's name when unprefixed)
	title string   // its serverInfo's title, else name, made safe to show (cleanTitle); "" when none or the same as name
	tools []*entry // its tools in the view, in catalogue order (those a meta tool shadows left out)
}

// Bounds of the summary: it is read on every turn of the model, so it stays short
// whatever the upstreams say of themselves or however many there are.
const (
	maxServiceTitle = 40 // runes of a server's title
	maxServices     = 60 // named services; the rest are counted
)

// servicesOf groups a search-mode view's tools by upstream, in catalogue order (the
// upstreams' configuration order). A per-client catalogue instance counts as its
// upstream.
func servicesOf(v *epView) []service {
	var out []service
	at := map[string]int{}
	for _, e := range v.tools {
		if v.shadowed[e.exposed] != nil {
			continue // listed as the proxy's tool, found by no search
		}
		i, ok := at[e.owner.name]
		if !ok {
			i = len(out)
			at[e.owner.name] = i
			name := e.owner.namespace
			if name == "" {
				name = e.owner.name
			}
			out = append(out, service{name: name, title: cleanTitle(serverTitle(e.owner), name)})
		}
		out[i].tools = append(out[i].tools, e)
	}
	return out
}

// serverTitle is what b's serverInfo calls the server: its title, else its name.
func serverTitle(b *backend) string {
	info := b.up.Info().ServerInfo
	if len(info) == 0 {
		return ""
	}
	if t, ok, _ := jsonx.GetString(info, "title"); ok && strings.TrimSpace(t) != "" {
		return t
	}
	n, _, _ := jsonx.GetString(info, "name")
	return n
}

// cleanTitle makes a server's own title safe to put before the model: one line of
// letters, digits, spaces and a little punctuation (nothing that could open markup or
// a quotation), at most maxServiceTitle runes; "" when nothing is left or it only
// repeats name. The server chose it: it says what the server is called, not what the
// model should do, so it is kept short and plain.
func cleanTitle(t, name string) string {
	words := strings.FieldsFunc(t, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("-_.&+/'", r)
	})
	out := []rune(strings.Join(words, " "))
	if len(out) > maxServiceTitle {
		out = append([]rune(strings.TrimSpace(string(out[:maxServiceTitle-1]))), '…')
	}
	if len(out) == 0 || strings.EqualFold(string(out), name) {
		return ""
	}
	return string(out)
}

// servicesSummary is the sentence naming the services a class of principal sees, with
// how many of their tools it sees; visible nil: all. "" when it sees none.
func servicesSummary(svcs []service, visible func(string) bool) string {
	var b strings.Builder
	named, more := 0, 0
	for i := range svcs {
		s := &svcs[i]
		n := len(s.tools)
		if visible != nil {
			n = 0
			for _, e := range s.tools {
				if visible(e.exposed) {
					n++
				}
			}
		}
		if n == 0 {
			continue // nothing of it is this principal's: not even its name
		}
		if named == maxServices {
			more++
			continue
		}
		if named == 0 {
			b.WriteString("Its services: ")
		} else {
			b.WriteString(", ")
		}
		named++
		b.WriteString(s.name)
		b.WriteString(" (")
		if s.title != "" {
			b.WriteString(s.title)
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(n))
		if n == 1 {
			b.WriteString(" tool)")
		} else {
			b.WriteString(" tools)")
		}
	}
	if named == 0 {
		return ""
	}
	if more > 0 {
		b.WriteString(", and " + strconv.Itoa(more) + " more")
	}
	b.WriteString(".")
	return b.String()
}

// metaFor is search_tools and call_tool as the principal class of req sees them: the
// services named are those it sees, with the tools it sees counted. It runs when a list
// view is built, which is cached per snapshot, endpoint and class (snapshot.view).
func (v *epView) metaFor(r *Router, s *snapshot, req *Request) []json.RawMessage {
	cv := r.classViewOf(s, req, v)
	if cv.visible == nil {
		return v.meta
	}
	return metaTools(v.ep, servicesSummary(v.services, cv.visible))
}
