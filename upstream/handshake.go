package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/jsonx"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
)

// capabilities is the part of ServerCapabilities the proxy acts on.
type capabilities struct {
	Tools     *struct{} `json:"tools"`
	Prompts   *struct{} `json:"prompts"`
	Resources *struct{} `json:"resources"`
	Logging   *struct{} `json:"logging"`
	Tasks     *struct {
		List *struct{} `json:"list"`
	} `json:"tasks"`
}

type initializeResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      json.RawMessage `json:"serverInfo"`
	Instructions    string          `json:"instructions"`
}

// initialize performs the legacy handshake: initialize, check the version the server
// chose, notifications/initialized.
func (c *conn) initialize(ctx context.Context) (Info, error) {
	c.u.mu.Lock()
	caps := c.u.spec.ClientCapabilities
	c.u.mu.Unlock()
	if len(caps) == 0 {
		caps = json.RawMessage("{}")
	}
	params, err := jsonx.Marshal(map[string]any{
		"protocolVersion": mcp.LatestLegacyVersion,
		"capabilities":    caps,
		"clientInfo":      map[string]string{"name": c.u.spec.ClientName, "version": c.u.spec.ClientVersion},
	})
	if err != nil {
		return Info{}, err
	}
	resp, err := c.call(ctx, &Request{Method: mcp.MethodInitialize, Params: params, Timeout: c.u.spec.StartupTimeout})
	if err != nil {
		return Info{}, fmt.Errorf("initialize: %w", err)
	}
	if resp.Error != nil {
		return Info{}, fmt.Errorf("initialize: upstream answered with error %d: %s", resp.Error.Code, resp.Error.Message)
	}
	var res initializeResult
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return Info{}, fmt.Errorf("initialize: malformed result: %w", err)
	}
	if !mcp.IsLegacyVersion(res.ProtocolVersion) {
		return Info{}, fmt.Errorf("initialize: upstream chose protocol version %q, which the proxy does not support (supported: %v)",
			res.ProtocolVersion, mcp.LegacyVersions())
	}
	info := Info{
		ProtocolVersion: res.ProtocolVersion,
		Capabilities:    res.Capabilities,
		ServerInfo:      res.ServerInfo,
		Instructions:    res.Instructions,
	}
	if len(info.Capabilities) == 0 || string(info.Capabilities) == "null" {
		info.Capabilities = json.RawMessage("{}")
	}
	if err := json.Unmarshal(info.Capabilities, &info.caps); err != nil {
		return Info{}, fmt.Errorf("initialize: malformed capabilities: %w", err)
	}
	c.setProtocolVersion(res.ProtocolVersion) // HTTP: every later request carries it
	if err := c.write(jsonrpc.NewNotification(mcp.NotificationInitialized, nil)); err != nil {
		return Info{}, err
	}
	if w, ok := c.proc.(interface{ WaitStreams(time.Duration) }); ok {
		w.WaitStreams(2 * time.Second) // an HTTP session's GET stream, before the first call
	}
	return info, nil
}

// HasTools and friends report the upstream's declared capabilities.
func (i Info) HasTools() bool     { return i.caps.Tools != nil }
func (i Info) HasPrompts() bool   { return i.caps.Prompts != nil }
func (i Info) HasResources() bool { return i.caps.Resources != nil }
func (i Info) HasLogging() bool   { return i.caps.Logging != nil }
func (i Info) HasTaskList() bool  { return i.caps.Tasks != nil && i.caps.Tasks.List != nil }

// maxPages bounds list pagination against an upstream that never stops paging.
const maxPages = 1000

// listAll fetches every page of a list method and returns the items of key.
func (c *conn) listAll(ctx context.Context, method, key string) ([]json.RawMessage, error) {
	items, _, err := c.listAllHinted(ctx, method, key)
	return items, err
}

// listAllHinted is listAll that also returns the caching hints of the pages (the
// smallest ttl; private when any page is).
func (c *conn) listAllHinted(ctx context.Context, method, key string) (items []json.RawMessage, hint CacheHint, err error) {
	hint = CacheHint{TTLMs: -1}
	defer func() {
		if hint.TTLMs < 0 {
			hint = CacheHint{} // no page said anything: ttl 0
		}
	}()
	var cursor *string
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page == maxPages {
			return items, hint, fmt.Errorf("%s: gave up after %d pages", method, maxPages)
		}
		var params json.RawMessage
		if cursor != nil {
			params, _ = jsonx.Marshal(map[string]string{"cursor": *cursor})
		}
		resp, err := c.call(ctx, &Request{Method: method, Params: params})
		if err != nil {
			return items, hint, fmt.Errorf("%s: %w", method, err)
		}
		if resp.Error != nil {
			return items, hint, fmt.Errorf("%s: upstream error %d: %s", method, resp.Error.Code, resp.Error.Message)
		}
		raw := map[string]json.RawMessage{}
		if err := json.Unmarshal(resp.Result, &raw); err != nil {
			return items, hint, fmt.Errorf("%s: malformed result: %w", method, err)
		}
		var next *string
		if nc, ok := raw["nextCursor"]; ok && string(nc) != "null" {
			if err := json.Unmarshal(nc, &next); err != nil {
				return items, hint, fmt.Errorf("%s: nextCursor is not a string: %w", method, err)
			}
		}
		hint = hint.merge(pageHint(raw))
		if list, ok := raw[key]; ok && string(list) != "null" {
			var got []json.RawMessage
			if err := json.Unmarshal(list, &got); err != nil {
				return items, hint, fmt.Errorf("%s: %q is not an array: %w", method, key, err)
			}
			items = append(items, got...)
		}
		if next == nil || *next == "" {
			return items, hint, nil
		}
		if seen[*next] {
			return items, hint, fmt.Errorf("%s: upstream repeated cursor %q; stopped paging", method, *next)
		}
		seen[*next] = true
		cursor = next
	}
}

// fetch loads the lists selected by kinds that the upstream declares, into a copy of base.
func (c *conn) fetch(ctx context.Context, info Info, base *Catalogue, kinds Kinds) (*Catalogue, error) {
	cat := *base
	var errs []error
	get := func(k Kinds, has bool, method, key string, dst *[]json.RawMessage, hint *CacheHint) {
		if kinds&k == 0 {
			return
		}
		if !has {
			*dst, *hint = nil, CacheHint{}
			return
		}
		items, h, err := c.listAllHinted(ctx, method, key)
		if err != nil {
			errs = append(errs, err)
		}
		*dst, *hint = items, h
	}
	get(KindTools, info.HasTools(), mcp.MethodToolsList, "tools", &cat.Tools, &cat.Hints.Tools)
	get(KindPrompts, info.HasPrompts(), mcp.MethodPromptsList, "prompts", &cat.Prompts, &cat.Hints.Prompts)
	get(KindResources, info.HasResources(), mcp.MethodResourcesList, "resources", &cat.Resources, &cat.Hints.Resources)
	get(KindTemplates, info.HasResources(), mcp.MethodResourcesTemplatesList, "resourceTemplates", &cat.Templates, &cat.Hints.Templates)
	if kinds&KindTools != 0 {
		cat.Tools, cat.ParamHeaders = paramHeaders(cat.Tools, c.ex != nil, c.log)
	}
	return &cat, errors.Join(errs...)
}

// CacheHint is what a modern server says about caching a result (ttlMs, cacheScope). The
// zero value, what legacy servers imply, is "do not reuse; for this caller only".
type CacheHint struct {
	TTLMs  int64 // 0: immediately stale
	Public bool  // cacheScope "public"; false means "private"
}

// merge combines two hints for a merged result: the smallest ttl, and private wins.
func (h CacheHint) merge(o CacheHint) CacheHint {
	if h.TTLMs < 0 { // nothing yet
		return o
	}
	return CacheHint{TTLMs: min(h.TTLMs, o.TTLMs), Public: h.Public && o.Public}
}

// Merge is merge for other packages.
func (h CacheHint) Merge(o CacheHint) CacheHint { return h.merge(o) }

func pageHint(raw map[string]json.RawMessage) CacheHint {
	var h CacheHint
	if t, ok := raw["ttlMs"]; ok {
		_ = json.Unmarshal(t, &h.TTLMs)
		if h.TTLMs < 0 {
			h.TTLMs = 0
		}
	}
	var scope string
	if sc, ok := raw["cacheScope"]; ok {
		_ = json.Unmarshal(sc, &scope)
	}
	h.Public = scope == "public"
	return h
}
