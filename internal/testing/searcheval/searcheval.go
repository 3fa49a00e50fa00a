// Package searcheval measures a search ranker on the committed benchmark: the corpus of
// real MCP servers' tool lists (search/testdata/corpus, refreshed by `make
// search-corpus`) and the labelled query set (search/testdata/queries.json). It serves
// the quality gate in search's tests and `make bench-search`; the product never imports
// it.
package searcheval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/search"
)

// Server is one server's file of the corpus.
type Server struct {
	Server  string            `json:"server"` // its namespace
	Package string            `json:"package"`
	Version string            `json:"version"`
	Tools   []json.RawMessage `json:"tools"` // as the proxy listed them
}

// LoadCorpus reads every server file of dir (servers.json, the pinned list, is not one).
func LoadCorpus(dir string) ([]Server, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Server
	for _, f := range files {
		if filepath.Base(f) == "servers.json" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var s Server
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no corpus in %s", dir)
	}
	return out, nil
}

// Docs turns the corpus into the ranker's documents.
func Docs(servers []Server) ([]search.Doc, error) {
	var docs []search.Doc
	for _, s := range servers {
		for _, t := range s.Tools {
			d, err := search.DocFromTool(t, s.Server)
			if err != nil {
				return nil, fmt.Errorf("server %s: %w", s.Server, err)
			}
			docs = append(docs, d)
		}
	}
	return docs, nil
}

// Query is one labelled query: any of Want is a right answer.
type Query struct {
	Query string   `json:"query"`
	Want  []string `json:"want"`
}

// LoadQueries reads the query set and checks that every wanted tool is in docs.
func LoadQueries(path string, docs []search.Doc) ([]Query, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var qs []Query
	if err := json.Unmarshal(raw, &qs); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	names := map[string]bool{}
	for _, d := range docs {
		names[d.Name] = true
	}
	for i, q := range qs {
		if len(q.Want) == 0 {
			return nil, fmt.Errorf("%s: query %d (%q) wants nothing", path, i, q.Query)
		}
		for _, w := range q.Want {
			if !names[w] {
				return nil, fmt.Errorf("%s: query %d (%q) wants %q, which the corpus does not have", path, i, q.Query, w)
			}
		}
	}
	return qs, nil
}

// Split returns the development half (even positions: what parameters are chosen on)
// and the held-out half (odd positions: only reported).
func Split(qs []Query) (dev, held []Query) {
	for i, q := range qs {
		if i%2 == 0 {
			dev = append(dev, q)
		} else {
			held = append(held, q)
		}
	}
	return dev, held
}

// Depth is how deep a result is read for MRR (and for a miss's rank).
const Depth = 10

// Miss is a query whose right answer was not first.
type Miss struct {
	Query Query
	Rank  int      // of the first right answer, 1-based; 0 when not in the first Depth
	Top   []string // the first results
}

// Result is a ranker's figures on a set of queries.
type Result struct {
	N      int
	At1    int // right answer first
	At5    int // a right answer in the first five
	RR     float64
	Misses []Miss // every query whose right answer was not first
}

func (r Result) Recall1() float64 { return ratio(r.At1, r.N) }
func (r Result) Recall5() float64 { return ratio(r.At5, r.N) }
func (r Result) MRR() float64 {
	if r.N == 0 {
		return 0
	}
	return r.RR / float64(r.N)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Evaluate runs every query against ix.
func Evaluate(ix search.Index, qs []Query) Result {
	var r Result
	for _, q := range qs {
		r.N++
		hits := ix.Search(q.Query, Depth, nil)
		rank := 0
		for i, h := range hits {
			if contains(q.Want, h.Doc.Name) {
				rank = i + 1
				break
			}
		}
		if rank > 0 {
			r.RR += 1 / float64(rank)
		}
		if rank == 1 {
			r.At1++
		}
		if rank >= 1 && rank <= 5 {
			r.At5++
		}
		if rank != 1 {
			top := make([]string, 0, 3)
			for i := 0; i < len(hits) && i < 3; i++ {
				top = append(top, hits[i].Doc.Name)
			}
			r.Misses = append(r.Misses, Miss{Query: q, Rank: rank, Top: top})
		}
	}
	return r
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// FullListBytes is the size of a tools/list result holding every tool of the corpus,
// as the proxy lists them in mode all: {"tools":[…]}.
func FullListBytes(servers []Server) int {
	var items []json.RawMessage
	for _, s := range servers {
		items = append(items, s.Tools...)
	}
	return listBytes(items)
}

// SearchListBytes is the size of a search-mode endpoint's first tools/list result over
// servers: the definitions of search_tools and call_tool, search_tools' description
// ending with the services it names (each server's namespace, its package's name
// standing in for its serverInfo, and its number of tools, as the router writes it).
func SearchListBytes(servers []Server) int {
	var def map[string]any
	if err := json.Unmarshal(SearchToolsDefinition, &def); err != nil {
		panic(err) // the definition below is valid JSON
	}
	var svcs []string
	for _, s := range servers {
		svcs = append(svcs, fmt.Sprintf("%s (%s, %d tools)", s.Server, strings.TrimPrefix(s.Package, "@"), len(s.Tools)))
	}
	if len(svcs) > 0 {
		def["description"] = def["description"].(string) + " Its services: " + strings.Join(svcs, ", ") + "."
	}
	st, err := json.Marshal(def)
	if err != nil {
		panic(err)
	}
	return listBytes([]json.RawMessage{st, CallToolDefinition})
}

func listBytes(items []json.RawMessage) int {
	var b bytes.Buffer
	b.WriteString(`{"tools":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := json.Compact(&b, it); err != nil {
			panic(err) // the corpus and the definitions below are valid JSON
		}
	}
	b.WriteString(`]}`)
	return b.Len()
}

// SearchToolsDefinition is the search_tools definition proposed for a search-mode
// endpoint (the endpoint's own may differ in wording; the size is what matters here).
var SearchToolsDefinition = json.RawMessage(`{
  "name": "search_tools",
  "title": "Search tools",
  "description": "Find the tools of this server that do what you need. This server has many tools and lists only this one: search before saying a tool does not exist. Describe the task in a few words, as you would to a colleague (\"open a pull request\", \"read a file\", \"post to a Slack channel\"); name the service when you know it. Returns the best matches, best first, with their full definitions (name, description, input schema). The tools found join your tool list, so you can call them by name; if your tool list does not change, call them through call_tool. Search again with other words if nothing fits.",
  "inputSchema": {
    "type": "object",
    "properties": {
      "query": {"type": "string", "description": "What you want to do, in a few words."},
      "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5, "description": "How many tools to return at most."}
    },
    "required": ["query"]
  },
  "annotations": {"readOnlyHint": true, "openWorldHint": false}
}`)

// CallToolDefinition is the call_tool definition for clients that do not refresh their
// tool list.
var CallToolDefinition = json.RawMessage(`{
  "name": "call_tool",
  "title": "Call a tool found by searching",
  "description": "Call a tool that search_tools found, by its name, with its arguments. Use it when that tool is not in your tool list.",
  "inputSchema": {
    "type": "object",
    "properties": {
      "name": {"type": "string", "description": "The tool's name, as search_tools returned it."},
      "arguments": {"type": "object", "description": "The tool's arguments, as its input schema says."}
    },
    "required": ["name"]
  }
}`)

// FormatMisses writes each miss: the query, what was wanted, what came first. With ex,
// also why the first result and the first wanted tool scored as they did.
func FormatMisses(b *strings.Builder, misses []Miss, ex search.Explainer) {
	for _, m := range misses {
		rank := "not in top 10"
		if m.Rank > 0 {
			rank = fmt.Sprintf("rank %d", m.Rank)
		}
		fmt.Fprintf(b, "  %-14s %q\n      want %s\n      got  %s\n", rank, m.Query.Query,
			strings.Join(m.Query.Want, " | "), strings.Join(m.Top, ", "))
		if ex != nil {
			if len(m.Top) > 0 {
				fmt.Fprintf(b, "      first: %s\n", ex.Explain(m.Query.Query, m.Top[0]))
			}
			fmt.Fprintf(b, "      wanted %s: %s\n", m.Query.Want[0], ex.Explain(m.Query.Query, m.Query.Want[0]))
		}
	}
}
