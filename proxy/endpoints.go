package proxy

import (
	"fmt"
	"slices"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/plugins"
	"github.com/mcp-proxy/mcp-proxy/router"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// builtinRanker is the ranker of every endpoint whose search block names no plugin, and
// the fallback of those that do: lexical, deterministic, incremental (package search).
var builtinRanker search.Ranker = search.BM25F{}

// ServeEndpoint makes the stdio front end serve the endpoint named name (an endpoint
// block of the configuration) instead of the whole catalogue, as `mcp-proxy run
// --endpoint NAME` does; with Oneshot, Router's EndpointTools lists it. New fails when
// the configuration has no such endpoint or has a listen block (HTTP serves every
// endpoint on its own path).
func ServeEndpoint(name string) Option {
	return func(o *options) { o.endpoint = name }
}

// checkEndpoint reports what is wrong with serving endpoint name of cfg on stdio.
func checkEndpoint(cfg *config.Config, name string, oneshot bool) error {
	if name == "" {
		return nil
	}
	if !slices.ContainsFunc(cfg.Endpoints, func(ep config.Endpoint) bool { return ep.Name == name }) {
		names := make([]string, len(cfg.Endpoints))
		for i, ep := range cfg.Endpoints {
			names[i] = ep.Name
		}
		if len(names) == 0 {
			return fmt.Errorf("endpoint %q: the configuration has no endpoint block", name)
		}
		return fmt.Errorf("endpoint %q: no such endpoint block (endpoints: %v)", name, names)
	}
	if len(cfg.Listen) > 0 && !oneshot {
		return fmt.Errorf("endpoint %q: the configuration has a listen block; over HTTP every endpoint is served on its own path", name)
	}
	return nil
}

// checkServedEndpoint refuses a reload that removes the endpoint this process serves on
// stdio (run --endpoint NAME): its one client has no other path to go to and no way to
// be told, and a stdio proxy serving nothing would look alive while answering every
// name as unknown. The reload is rejected whole (a reload that cannot apply changes
// nothing); the block can change, and the process restarted without --endpoint or with
// another one.
func (e *engine) checkServedEndpoint(next *config.Config) error {
	if e.endpoint == "" {
		return nil
	}
	if slices.ContainsFunc(next.Endpoints, func(ep config.Endpoint) bool { return ep.Name == e.endpoint }) {
		return nil
	}
	return fmt.Errorf("endpoint %q is served on stdio by this process (run --endpoint %s) and the new configuration removes it: "+
		"keep its block, or restart the process with another --endpoint", e.endpoint, e.endpoint)
}

// endpointsOf makes the router's endpoints of cfg; host provides the rankers of plugins
// (nil: none, every endpoint ranks with the built-in ranker).
func endpointsOf(cfg *config.Config, host *plugins.Host) []router.Endpoint {
	out := make([]router.Endpoint, 0, len(cfg.Endpoints))
	for _, ep := range cfg.Endpoints {
		re := router.Endpoint{
			Name:          ep.Name,
			Upstreams:     ep.Upstreams,
			Tools:         router.Patterns(ep.Tools),
			Prompts:       router.Patterns(ep.Prompts),
			Resources:     router.Patterns(ep.Resources),
			Search:        ep.Mode == config.ModeSearch,
			Always:        ep.Always,
			Instructions:  ep.Instructions,
			Limit:         ep.Search.Limit,
			MaxLimit:      ep.Search.MaxLimit,
			MaxActive:     ep.Search.MaxActive,
			ToolReference: router.ToolReference{Clients: ep.Search.ToolReferenceClients, Prefix: ep.Search.ToolReferencePrefix},
		}
		if ep.Search.Ranker != "" && host != nil {
			re.Ranker = host.Ranker(ep.Search.Ranker, builtinRanker)
		}
		if len(cfg.Listen) > 0 {
			re.Path = ep.Path
		}
		out = append(out, re)
	}
	return out
}

// endpointPaths are the HTTP paths of cfg's endpoints, by name.
func endpointPaths(cfg *config.Config) map[string]string {
	if len(cfg.Endpoints) == 0 {
		return nil
	}
	out := make(map[string]string, len(cfg.Endpoints))
	for _, ep := range cfg.Endpoints {
		out[ep.Name] = ep.Path
	}
	return out
}

// endpointsEqual reports whether two configurations configure the same endpoints.
func endpointsEqual(a, b *config.Config) bool {
	return config.Equal(a.Endpoints, b.Endpoints, a, b)
}

// endpointChanges describes what a reload changes of the endpoints.
func endpointChanges(a, b *config.Config) []string {
	var out []string
	was := map[string]config.Endpoint{}
	for _, ep := range a.Endpoints {
		was[ep.Name] = ep
	}
	for _, ep := range b.Endpoints {
		old, ok := was[ep.Name]
		switch {
		case !ok:
			out = append(out, "endpoint "+ep.Name+" added")
		case !config.Equal(old, ep, a, b):
			out = append(out, "endpoint "+ep.Name+" changed")
		}
		delete(was, ep.Name)
	}
	for _, ep := range a.Endpoints {
		if _, gone := was[ep.Name]; gone {
			out = append(out, "endpoint "+ep.Name+" removed")
		}
	}
	return out
}
