package plugins

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// HookRank names the rank hook's calls (Index and Rank) in HookEvents.
const HookRank = "rank"

// Ranker returns a search.Ranker that ranks with the rank hook of the plugin block
// named name, and with fallback (the built-in ranker) until the plugin has indexed a
// catalogue, whenever it fails or is slow (the block's timeout: fail-open, whatever its
// failure mode), and after it restarted until it has indexed again. No such plugin, or
// one without the rank hook, gives fallback itself (with a warning).
func (h *Host) Ranker(name string, fallback search.Ranker) search.Ranker {
	for _, in := range h.instances {
		if in.spec.Name != name {
			continue
		}
		if in.hooks&hookRank == 0 {
			h.log.Warn().Str("plugin", name).Msg("an endpoint's search names a plugin that does not rank (no rank hook); the built-in ranker ranks")
			return fallback
		}
		return &pluginRanker{in: in, h: h, fallback: fallback}
	}
	h.log.Warn().Str("plugin", name).Msg("an endpoint's search names a plugin that is not running; the built-in ranker ranks")
	return fallback
}

// pluginRanker builds pluginIndexes.
type pluginRanker struct {
	in       *instance
	h        *Host
	fallback search.Ranker
}

var _ search.Ranker = (*pluginRanker)(nil)

// Build hands docs to the plugin (in the background: Build is called where the
// catalogue is rebuilt, which must not wait for a plugin) and builds the fallback's
// index at once, which answers until the plugin has.
func (p *pluginRanker) Build(docs []search.Doc, prev search.Index) search.Index {
	var prevFallback search.Index
	previous := ""
	if pi, ok := prev.(*pluginIndex); ok {
		prevFallback, previous = pi.fallback, pi.id
	}
	ix := &pluginIndex{r: p, id: p.in.spec.Name + "-" + strconv.FormatUint(p.h.indexSeq.Add(1), 10), previous: previous,
		docs: docs, fallback: p.fallback.Build(docs, prevFallback)}
	ix.loaded.Store(-1)
	ix.load()
	return ix
}

// pluginIndex is one catalogue as the plugin indexed it, and the fallback's index of it.
type pluginIndex struct {
	r        *pluginRanker
	id       string
	previous string
	docs     []search.Doc
	fallback search.Index
	// loaded is the plugin's restart count when it indexed the catalogue (-1: not yet):
	// a plugin that restarted since has lost it.
	loaded  atomic.Int64
	loading atomic.Bool
}

var (
	_ search.Index      = (*pluginIndex)(nil)
	_ search.Restricter = (*pluginIndex)(nil)
)

// Len is the number of documents indexed.
func (ix *pluginIndex) Len() int { return len(ix.docs) }

// ready reports whether the running plugin holds the index.
func (ix *pluginIndex) ready() bool { return ix.loaded.Load() == ix.r.in.restarts.Load() }

// load sends the documents to the plugin from a goroutine of the host's (one at a time
// per index), bounded by the block's start_timeout.
func (ix *pluginIndex) load() {
	if !ix.loading.CompareAndSwap(false, true) {
		return
	}
	h, in := ix.r.h, ix.r.in
	if !h.loads.add() {
		ix.loading.Store(false)
		return // the host is closing
	}
	req := &pb.IndexRequest{Index: ix.id, Previous: ix.previous, Documents: make([]*pb.Document, len(ix.docs))}
	for i, d := range ix.docs {
		req.Documents[i] = &pb.Document{Name: d.Name, Namespace: d.Namespace, Title: d.Title, Description: d.Description, InputSchema: d.InputSchema}
	}
	go func() {
		defer h.loads.done()
		defer ix.loading.Store(false)
		gen := in.restarts.Load()
		start := time.Now()
		err := ix.index(h.loads.ctx, req)
		in.observe(HookRank, start, err)
		if err != nil {
			if h.loads.ctx.Err() == nil {
				in.log.Warn().Err(err).Str("index", ix.id).Int("tools", len(ix.docs)).
					Msg("the plugin could not index an endpoint's tools; the built-in ranker ranks them")
			}
			return
		}
		ix.loaded.Store(gen)
		in.log.Debug().Str("index", ix.id).Int("tools", len(ix.docs)).Dur("took", time.Since(start)).Msg("the plugin indexed an endpoint's tools")
	}()
}

// index makes the Index call, bounded by the block's start_timeout.
func (ix *pluginIndex) index(ctx context.Context, req *pb.IndexRequest) error {
	in := ix.r.in
	l := in.conn.Load()
	if l == nil {
		return errDown
	}
	in.calls.enter()
	defer in.calls.leave()
	ctx, cancel := context.WithTimeout(ctx, in.spec.StartTimeout)
	defer cancel()
	_, err := l.rpc.Index(ctx, req)
	return err
}

// Search ranks with the plugin when it holds the index, with the fallback otherwise.
func (ix *pluginIndex) Search(query string, limit int, visible func(name string) bool) []search.Hit {
	hidden := 0
	if visible != nil {
		for i := range ix.docs {
			if !visible(ix.docs[i].Name) {
				hidden++
			}
		}
	}
	return ix.search(query, limit, visible, hidden, ix.fallback)
}

// Restrict returns the index as a principal sees it: what it may not see is counted
// once, and the fallback's view is restricted too when it can be.
func (ix *pluginIndex) Restrict(visible func(name string) bool) search.Index {
	v := &pluginView{ix: ix, visible: visible, fallback: ix.fallback}
	for i := range ix.docs {
		if !visible(ix.docs[i].Name) {
			v.hidden++
		}
	}
	if rs, ok := ix.fallback.(search.Restricter); ok {
		v.fallback, v.restricted = rs.Restrict(visible), true
	}
	return v
}

// search asks the plugin for enough hits that limit of them are visible (hidden is how
// many documents are not), keeps those, and falls back on any failure.
func (ix *pluginIndex) search(query string, limit int, visible func(string) bool, hidden int, fallback search.Index) []search.Hit {
	fb := func() []search.Hit { return fallback.Search(query, limit, visible) }
	if limit <= 0 || len(ix.docs) == 0 {
		return nil
	}
	if !ix.ready() {
		ix.load() // not yet, or the plugin restarted since
		return fb()
	}
	in := ix.r.in
	want := min(len(ix.docs), limit+hidden)
	start := time.Now()
	resp, err := invoke(context.Background(), in, func(ctx context.Context, l *live) (*pb.RankResponse, error) {
		in.calls.enter()
		defer in.calls.leave()
		return l.rpc.Rank(ctx, &pb.RankRequest{Index: ix.id, Query: query, Limit: uint32(want)})
	})
	if err == nil && len(resp.Hits) > want {
		err = fmt.Errorf("it ranked %d documents, %d were asked for", len(resp.Hits), want)
	}
	in.observe(HookRank, start, err)
	if err != nil {
		if status.Code(err) == codes.NotFound || errors.Is(err, errDown) {
			ix.loaded.Store(-1) // it lost the index: index again
		}
		in.log.Debug().Err(err).Msg("the plugin did not rank; the built-in ranker answers")
		return fb()
	}
	hits := make([]search.Hit, 0, limit)
	seen := make(map[string]bool, len(resp.Hits))
	for _, h := range resp.Hits {
		d := ix.doc(h.Name)
		if d == nil || seen[h.Name] || (visible != nil && !visible(h.Name)) {
			continue // not a document of the index, twice, or not the caller's to see
		}
		seen[h.Name] = true
		if hits = append(hits, search.Hit{Doc: d, Score: h.Score}); len(hits) == limit {
			break
		}
	}
	return hits
}

// doc finds a document by name (a ranking names few: a scan costs less than a map built
// per index, which most searches never need).
func (ix *pluginIndex) doc(name string) *search.Doc {
	for i := range ix.docs {
		if ix.docs[i].Name == name {
			return &ix.docs[i]
		}
	}
	return nil
}

// pluginView is a pluginIndex as one principal sees it (Restrict).
type pluginView struct {
	ix         *pluginIndex
	visible    func(string) bool
	hidden     int
	fallback   search.Index // the fallback's index, restricted when restricted
	restricted bool
}

func (v *pluginView) Len() int { return len(v.ix.docs) - v.hidden }

func (v *pluginView) Search(query string, limit int, visible func(name string) bool) []search.Hit {
	if visible != nil { // narrowed again: count anew
		both := func(n string) bool { return v.visible(n) && visible(n) }
		return v.ix.Search(query, limit, both)
	}
	fb := v.fallback
	if !v.restricted {
		fb = &narrowed{v.fallback, v.visible}
	}
	return v.ix.search(query, limit, v.visible, v.hidden, fb)
}

// narrowed is an index searched with a fixed visible function.
type narrowed struct {
	ix      search.Index
	visible func(string) bool
}

func (n *narrowed) Len() int { return n.ix.Len() }
func (n *narrowed) Search(query string, limit int, _ func(string) bool) []search.Hit {
	return n.ix.Search(query, limit, n.visible)
}

// loads tracks the index loads of a host's rankers: each runs on a goroutine of its own,
// which the host's Close cancels and waits for.
type loads struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed, and wg.Add against close
	closed bool
	wg     sync.WaitGroup
}

func newLoads() *loads {
	ctx, cancel := context.WithCancel(context.Background())
	return &loads{ctx: ctx, cancel: cancel}
}

// add counts one more load; false once the host is closing.
func (l *loads) add() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.wg.Add(1)
	return true
}

func (l *loads) done() { l.wg.Done() }

// close cancels the loads under way and waits for them.
func (l *loads) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
}
