package main

import (
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/router"
)

// applyFilters hands each enabled upstream's tools and prompts filters (its tools,
// prompts, tool and prompt blocks) to the router, which applies them when it builds the
// merged catalogue.
func applyFilters(r *router.Router, cfg *config.Config, log zerolog.Logger) {
	for _, uc := range cfg.Upstreams {
		if uc.Disabled || (isZeroFilter(&uc.Tools) && isZeroFilter(&uc.Prompts)) {
			continue
		}
		f := router.Filter{Tools: selectionOf(&uc.Tools), Prompts: selectionOf(&uc.Prompts)}
		if err := r.SetFilter(uc.Name, f); err != nil { // config has vetted it: not expected
			// Fail closed: an exclusion that did not apply must not expose what it hides.
			log.Error().Err(err).Str("upstream", uc.Name).Msg("applying the upstream's filters; none of its tools and prompts is served")
			none := router.Selection{Exclude: []string{"*"}}
			if err := r.SetFilter(uc.Name, router.Filter{Tools: none, Prompts: none}); err != nil {
				log.Error().Err(err).Str("upstream", uc.Name).Msg("hiding the upstream's tools and prompts")
			}
		}
	}
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
