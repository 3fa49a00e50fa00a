package trust

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// catalogueOf makes n tool definitions shaped like real servers' (a few sentences of
// description, three to five described parameters, annotations), spread over ups
// upstreams.
func catalogueOf(n, ups int) []router.Fetched {
	fs := make([]router.Fetched, ups)
	for u := range fs {
		fs[u] = router.Fetched{Upstream: fmt.Sprintf("up%d", u), Ready: true, Catalogue: &upstream.Catalogue{},
			Info: upstream.Info{ServerInfo: json.RawMessage(`{"name":"s","version":"1"}`)}}
	}
	for i := range n {
		props := map[string]any{}
		for p := range 3 + i%3 {
			props[fmt.Sprintf("param_%d", p)] = map[string]any{"type": "string",
				"description": fmt.Sprintf("The %d-th input of tool %d: a path, a query or an identifier, as the server expects it.", p, i)}
		}
		def := map[string]any{
			"name":        fmt.Sprintf("tool_%04d", i),
			"title":       fmt.Sprintf("Tool %d", i),
			"description": strings.Repeat(fmt.Sprintf("Does the %d-th thing of this server with the given inputs and returns the result as text. ", i), 3),
			"inputSchema": map[string]any{"type": "object", "properties": props, "required": []string{"param_0"}},
			"annotations": map[string]any{"readOnlyHint": i%2 == 0, "openWorldHint": false},
		}
		raw, _ := json.Marshal(def)
		c := fs[i%ups].Catalogue
		c.Tools = append(c.Tools, raw)
	}
	return fs
}

// catalogueInServerOrder is catalogueOf with each object's members in the order
// JavaScript servers send them (type before properties, name first), not sorted: the
// canonical form reorders them.
func catalogueInServerOrder(n, ups int) []router.Fetched {
	fs := catalogueOf(n, ups)
	for _, f := range fs {
		for i, t := range f.Catalogue.Tools {
			var d struct {
				Name        string `json:"name"`
				Title       string `json:"title"`
				Description string `json:"description"`
				InputSchema struct {
					Properties map[string]struct {
						Type        string `json:"type"`
						Description string `json:"description"`
					} `json:"properties"`
					Required []string `json:"required"`
				} `json:"inputSchema"`
				Annotations struct {
					ReadOnlyHint  bool `json:"readOnlyHint"`
					OpenWorldHint bool `json:"openWorldHint"`
				} `json:"annotations"`
			}
			if err := json.Unmarshal(t, &d); err != nil {
				panic(err)
			}
			var b strings.Builder
			fmt.Fprintf(&b, `{"name":%q,"title":%q,"description":%q,"inputSchema":{"type":"object","properties":{`, d.Name, d.Title, d.Description)
			for p := range len(d.InputSchema.Properties) {
				k := fmt.Sprintf("param_%d", p)
				if p > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `%q:{"type":%q,"description":%q}`, k, d.InputSchema.Properties[k].Type, d.InputSchema.Properties[k].Description)
			}
			req, _ := json.Marshal(d.InputSchema.Required)
			fmt.Fprintf(&b, `},"required":%s,"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"},"annotations":{"readOnlyHint":%v,"openWorldHint":%v}}`,
				req, d.Annotations.ReadOnlyHint, d.Annotations.OpenWorldHint)
			f.Catalogue.Tools[i] = json.RawMessage(b.String())
		}
	}
	return fs
}

// refetched copies every definition into a new catalogue: what a list_changed refetch
// of an unchanged server gives (new bytes, same content).
func refetched(fs []router.Fetched) []router.Fetched {
	out := make([]router.Fetched, len(fs))
	for i, f := range fs {
		c := &upstream.Catalogue{}
		for _, t := range f.Catalogue.Tools {
			c.Tools = append(c.Tools, append(json.RawMessage(nil), t...))
		}
		out[i] = f
		out[i].Catalogue = c
	}
	return out
}

func approvedVetter(b *testing.B, fs []router.Fetched) *Vetter {
	v := New(Options{Pin: PinEnforce, DefaultScreen: ScreenWithhold, Log: zerolog.Nop()})
	v.Vet(fs)
	l, err := v.Approved()
	if err != nil {
		b.Fatal(err)
	}
	v.SetLock(l, nil)
	return v
}

// BenchmarkVet300 is the cost of pinning and screening a catalogue of 300 tools (over 5
// upstreams) when it is fetched: first (nothing cached), refetched unchanged (new bytes,
// same content), and rebuilt for another reason (the same catalogues).
func BenchmarkVet300(b *testing.B) {
	fs := catalogueOf(300, 5)
	bytes := 0
	for _, f := range fs {
		for _, t := range f.Catalogue.Tools {
			bytes += len(t)
		}
	}
	b.Run("first", func(b *testing.B) { benchFirst(b, fs, bytes) })
	b.Run("first-server-order", func(b *testing.B) {
		fs := catalogueInServerOrder(300, 5)
		bytes := 0
		for _, f := range fs {
			for _, t := range f.Catalogue.Tools {
				bytes += len(t)
			}
		}
		benchFirst(b, fs, bytes)
	})
	b.Run("refetch", func(b *testing.B) {
		v := approvedVetter(b, fs)
		batches := make([][]router.Fetched, 64)
		for i := range batches {
			batches[i] = refetched(fs)
		}
		b.SetBytes(int64(bytes))
		b.ReportAllocs()
		i := 0
		cpu := cpuTime()
		for b.Loop() {
			v.Vet(batches[i%len(batches)])
			i++
		}
		reportCPU(b, cpu)
	})
	b.Run("unchanged", func(b *testing.B) {
		v := approvedVetter(b, fs)
		b.ReportAllocs()
		for b.Loop() {
			v.Vet(fs)
		}
	})
}

// cpuTime is the process's CPU time so far (user and system): on a loaded machine the
// wall time of a benchmark says little, its CPU time per operation does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(cpuTime()-since)/float64(b.N), "cpu-ns/op")
}

// benchFirst vets fs as a new vetter does: every definition seen for the first time.
func benchFirst(b *testing.B, fs []router.Fetched, bytes int) {
	l := approvedVetter(b, fs).Lock()
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	batches := make([][]router.Fetched, 16)
	for i := range batches {
		batches[i] = refetched(fs)
	}
	cpu := cpuTime()
	i := 0
	for b.Loop() {
		v := New(Options{Pin: PinEnforce, DefaultScreen: ScreenWithhold, Log: zerolog.Nop()})
		v.SetLock(l, nil)
		v.Vet(batches[i%len(batches)])
		i++
	}
	reportCPU(b, cpu)
}
