package proxy

import (
	"errors"
	"fmt"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// applyFilters hands each enabled upstream's tools and prompts filters (its tools,
// prompts, tool and prompt blocks) to the router, which applies them when it builds the
// merged catalogue. An error (not expected: config has vetted them) means the router
// must not start: an upstream would serve what its configuration hides.
func applyFilters(r *router.Router, cfg *config.Config) error {
	var errs []error
	for _, uc := range cfg.Upstreams {
		if uc.Disabled || (isZeroFilter(&uc.Tools) && isZeroFilter(&uc.Prompts)) {
			continue
		}
		f := router.Filter{Tools: selectionOf(&uc.Tools), Prompts: selectionOf(&uc.Prompts)}
		if err := r.SetFilter(uc.Name, f); err != nil {
			errs = append(errs, fmt.Errorf("upstream %q: %w", uc.Name, err))
		}
	}
	return errors.Join(errs...)
}

func isZeroFilter(f *config.Filter) bool {
	return f.Include == nil && f.Exclude == nil && len(f.Overrides) == 0
}

func selectionOf(f *config.Filter) router.Selection {
	s := router.Selection{Include: f.Include, Exclude: f.Exclude}
	if len(f.Overrides) > 0 {
		s.Overrides = make(map[string]router.Override, len(f.Overrides))
		for _, o := range f.Overrides {
			s.Overrides[o.Original] = router.Override{Name: o.Name, Title: o.Title, Description: o.Description}
		}
	}
	return s
}
