package trust

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// Allowances are the screening checks whose findings the configuration accepts
// (screen_allow): in every upstream, in one upstream, or in one item of an upstream. An
// accepted finding is reported, marked accepted, and never withholds its item; pinning
// is not affected (an accepted finding in a changed definition is still a change).
type Allowances struct {
	All      []string                 // proxy { screen_allow }
	Upstream map[string][]string      // upstream "NAME" { screen_allow }
	Item     map[AllowedItem][]string // tool "NAME" { screen_allow } and prompt "NAME" { screen_allow }
}

// AllowedItem is an item by its upstream's own name.
type AllowedItem struct {
	Upstream string
	Kind     Kind
	Name     string
}

// accepts reports whether findings of check are accepted in the item.
func (a *Allowances) accepts(up string, k Kind, name, check string) bool {
	return slices.Contains(a.All, check) || slices.Contains(a.Upstream[up], check) ||
		slices.Contains(a.Item[AllowedItem{up, k, name}], check)
}

// allowancesOf reads the screen_allow attributes of a configuration.
func allowancesOf(cfg *config.Config) Allowances {
	a := Allowances{All: cfg.Proxy.ScreenAllow}
	for _, u := range cfg.Upstreams {
		if len(u.ScreenAllow) > 0 {
			if a.Upstream == nil {
				a.Upstream = map[string][]string{}
			}
			a.Upstream[u.Name] = u.ScreenAllow
		}
		for _, f := range []struct {
			k  Kind
			os []config.Override
		}{{KindTool, u.Tools.Overrides}, {KindPrompt, u.Prompts.Overrides}} {
			for _, o := range f.os {
				if len(o.ScreenAllow) > 0 {
					if a.Item == nil {
						a.Item = map[AllowedItem][]string{}
					}
					a.Item[AllowedItem{u.Name, f.k, o.Original}] = o.ScreenAllow
				}
			}
		}
	}
	return a
}

// String spells the allowances in a fixed order (they are part of a vetter's settings).
func (a *Allowances) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "*=%s", strings.Join(a.All, ","))
	for _, up := range sortedKeys(a.Upstream) {
		fmt.Fprintf(&b, ";%s=%s", up, strings.Join(a.Upstream[up], ","))
	}
	items := make([]AllowedItem, 0, len(a.Item))
	for it := range a.Item {
		items = append(items, it)
	}
	slices.SortFunc(items, func(x, y AllowedItem) int {
		return strings.Compare(x.Upstream+"\x00"+string(x.Kind)+"\x00"+x.Name, y.Upstream+"\x00"+string(y.Kind)+"\x00"+y.Name)
	})
	for _, it := range items {
		fmt.Fprintf(&b, ";%s/%s/%s=%s", it.Upstream, it.Kind, it.Name, strings.Join(a.Item[it], ","))
	}
	return b.String()
}
