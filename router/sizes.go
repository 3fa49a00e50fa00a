package router

// Sizes is how many items of each kind one upstream contributes to the merged catalogue
// as clients are offered it (after the upstream block's filters and the presenter; before
// the per-principal view of the policy).
type Sizes struct {
	Upstream                             string
	Tools, Prompts, Resources, Templates int
}

// Sizes counts the current catalogue snapshot by upstream, in config order (an upstream
// that contributes nothing is listed with zeros). It walks the snapshot: for a metrics
// scrape or a status page, not for the request path.
func (r *Router) Sizes() []Sizes {
	list := r.all()
	out := make([]Sizes, len(list))
	at := make(map[*backend]int, len(list))
	for i, b := range list {
		out[i].Upstream = b.name
		at[b] = i
	}
	// A per-client upstream's items are owned by its catalogue instance, which is its
	// backend; an owner not found (none today) is skipped rather than miscounted.
	s := r.snap.Load()
	for _, e := range s.tools {
		if i, ok := at[e.owner]; ok {
			out[i].Tools++
		}
	}
	for _, e := range s.prompts {
		if i, ok := at[e.owner]; ok {
			out[i].Prompts++
		}
	}
	for _, res := range s.resources {
		if i, ok := at[res.owner]; ok {
			out[i].Resources++
		}
	}
	for _, t := range s.templates {
		if i, ok := at[t.owner]; ok {
			out[i].Templates++
		}
	}
	return out
}
