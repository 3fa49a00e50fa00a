package plugins

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// reverseRanker is a plugin ranking every document in reverse name order, whatever the
// query: plainly not the built-in ranker's answer.
type reverseRanker struct {
	mu      sync.Mutex
	indexes map[string][]string
	fail    bool // Rank fails
	slow    bool // Rank never answers in time
}

func (r *reverseRanker) fake() *fakePlugin {
	return &fakePlugin{
		index: func(req *pb.IndexRequest) (*pb.IndexResponse, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			var names []string
			for _, d := range req.Documents {
				names = append(names, d.Name)
			}
			slices.Sort(names)
			slices.Reverse(names)
			r.indexes[req.Index] = names
			delete(r.indexes, req.Previous)
			return &pb.IndexResponse{}, nil
		},
		rank: func(req *pb.RankRequest) (*pb.RankResponse, error) {
			r.mu.Lock()
			names, ok := r.indexes[req.Index]
			fail, slow := r.fail, r.slow
			r.mu.Unlock()
			switch {
			case slow:
				time.Sleep(time.Second)
			case fail:
				return nil, status.Error(codes.Internal, "broken")
			case !ok:
				return nil, status.Error(codes.NotFound, "no such index")
			}
			resp := &pb.RankResponse{}
			for _, n := range names[:min(int(req.Limit), len(names))] {
				resp.Hits = append(resp.Hits, &pb.Ranked{Name: n, Score: 1})
			}
			return resp, nil
		},
	}
}

func names(hits []search.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Doc.Name)
	}
	return out
}

// TestPluginRanker: the built-in ranker answers until the plugin has indexed, the
// plugin after; what the caller may not see is never returned (the plugin is asked for
// enough); a failing or slow plugin falls back; a plugin that lost its index (restarted)
// gets it again.
func TestPluginRanker(t *testing.T) {
	rr := &reverseRanker{indexes: map[string][]string{}}
	in := testInstance(t, Spec{Name: "embed", Timeout: 50 * time.Millisecond, StartTimeout: time.Second}, hookRank, rr.fake())
	h := &Host{log: zerolog.Nop(), instances: []*instance{in}, calls: newInflight(), loads: newLoads()}
	defer h.loads.close()
	docs := []search.Doc{
		{Name: "fs__read_file", Description: "Read a file"},
		{Name: "fs__write_file", Description: "Write a file"},
		{Name: "gh__create_issue", Description: "Open an issue"},
		{Name: "secret__tokens", Description: "Read the tokens of a file"},
	}
	ix := h.Ranker("embed", search.BM25F{}).Build(docs, nil)
	waitFor(t, func() bool { return ix.(*pluginIndex).ready() })
	if got := names(ix.Search("read a file", 2, nil)); !slices.Equal(got, []string{"secret__tokens", "gh__create_issue"}) {
		t.Errorf("the plugin's ranking: %v", got)
	}
	notSecret := func(n string) bool { return n != "secret__tokens" }
	view := ix.(search.Restricter).Restrict(notSecret)
	if got := names(view.Search("read a file", 3, nil)); !slices.Equal(got, []string{"gh__create_issue", "fs__write_file", "fs__read_file"}) {
		t.Errorf("a principal's view: %v", got)
	}
	rr.mu.Lock()
	rr.fail = true
	rr.mu.Unlock()
	if got := names(view.Search("read a file", 1, nil)); !slices.Equal(got, []string{"fs__read_file"}) {
		t.Errorf("failing plugin: %v, want the built-in ranker's", got)
	}
	rr.mu.Lock()
	rr.fail, rr.slow = false, true
	rr.mu.Unlock()
	start := time.Now()
	if got := names(ix.Search("write", 1, notSecret)); !slices.Equal(got, []string{"fs__write_file"}) {
		t.Errorf("slow plugin: %v", got)
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("a slow plugin held the search %v", d)
	}
	// The plugin restarts: its indexes are gone; the next search indexes again.
	rr.mu.Lock()
	rr.slow, rr.indexes = false, map[string][]string{}
	rr.mu.Unlock()
	in.restarts.Add(1)
	if got := names(ix.Search("read a file", 1, notSecret)); !slices.Equal(got, []string{"fs__read_file"}) {
		t.Errorf("after a restart, before indexing again: %v", got)
	}
	waitFor(t, func() bool { return ix.(*pluginIndex).ready() })
	if got := names(ix.Search("anything", 1, notSecret)); !slices.Equal(got, []string{"gh__create_issue"}) {
		t.Errorf("after indexing again: %v", got)
	}
	// A rebuild tells the plugin which index it replaces.
	ix2 := h.Ranker("embed", search.BM25F{}).Build(docs[:2], ix)
	waitFor(t, func() bool { return ix2.(*pluginIndex).ready() })
	rr.mu.Lock()
	n := len(rr.indexes)
	rr.mu.Unlock()
	if n != 1 {
		t.Errorf("the plugin holds %d indexes, want 1", n)
	}
	if r := h.Ranker("nope", search.BM25F{}); r != (search.BM25F{}) {
		t.Errorf("an unknown plugin ranks with %T", r)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
