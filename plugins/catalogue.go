package plugins

import (
	"context"
	"fmt"
	"time"

	pb "github.com/mcp-proxy/mcp-proxy/plugins/proto"
	"github.com/mcp-proxy/mcp-proxy/policy"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// presenter runs the catalogue hooks of the plugins that have one, in file order, when
// the router builds a new catalogue. Each sees the items its matchers select (principals
// and groups do not apply: a catalogue is presented once for everyone) and not hidden by
// an earlier plugin. A plugin that fails: failure = "open" leaves its items as they were;
// "closed" hides them, since what it would have hidden must not show; either way the
// catalogue is presented again when the plugin is back.
type presenter struct {
	plugins []*instance
}

var _ router.Presenter = (*presenter)(nil)

func (p *presenter) Present(items []router.Listed) {
	for _, in := range p.plugins {
		in.calls.enter()
		p.present(in, items)
		in.calls.leave()
	}
}

func (p *presenter) present(in *instance, items []router.Listed) {
	var idx []int
	req := &pb.CatalogueRequest{}
	for i := range items {
		it := &items[i]
		if it.Hide {
			continue
		}
		kind := policy.KindResource
		switch it.Kind {
		case router.TargetTool:
			kind = policy.KindTool
		case router.TargetPrompt:
			kind = policy.KindPrompt
		}
		if !in.sel.SelectsItem(&policy.Item{Kind: kind, Name: it.Name, Upstream: it.Upstream, Raw: it.Raw}) {
			continue
		}
		idx = append(idx, i)
		req.Items = append(req.Items, &pb.Item{Kind: kindOf(it.Kind, it.Template), Name: it.Name,
			Upstream: it.Upstream, OriginalName: it.Original, Raw: it.Raw})
	}
	if len(idx) == 0 {
		return
	}
	start := time.Now()
	resp, err := invoke(context.Background(), in, func(ctx context.Context, l *live) (*pb.CatalogueResponse, error) {
		return l.rpc.Catalogue(ctx, req)
	})
	if err == nil {
		err = checkChanges(resp, len(idx))
	}
	in.observe(HookCatalogue, start, err)
	if err != nil {
		if in.spec.FailOpen {
			in.log.Warn().Err(err).Int("items", len(idx)).Msg("plugin's catalogue hook failed; its items are listed unchanged (failure = \"open\")")
			return
		}
		in.log.Warn().Err(err).Int("items", len(idx)).Msg("plugin's catalogue hook failed; its items are hidden until it answers (failure = \"closed\")")
		for _, i := range idx {
			items[i].Hide = true
		}
		return
	}
	for _, c := range resp.Changes {
		it := &items[idx[c.Index]]
		if c.Hide {
			it.Hide = true
		} else if len(c.Raw) > 0 {
			it.Raw = c.Raw // checked by the router: same name, a JSON object
		}
	}
}

func checkChanges(resp *pb.CatalogueResponse, n int) error {
	for _, c := range resp.Changes {
		if int(c.Index) >= n {
			return fmt.Errorf("it changed item %d of the %d it was given", c.Index, n)
		}
	}
	return nil
}
