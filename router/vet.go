package router

import "github.com/mcp-proxy/mcp-proxy/upstream"

// Vetter decides which of each upstream's tools, prompts and resource templates are
// served, when a catalogue is fetched: the pinning and screening of package trust. It
// runs on every rebuild of the merged catalogue with every upstream's catalogue as the
// upstream listed it (before the upstream block's filters, the namespacing and the
// presenter), never per request. What it withholds is not listed and not routable: it
// does not exist for clients, and a call to it gets the answer for an unknown name.
type Vetter interface {
	// Vet sets Serve on the entries whose catalogue is not served as fetched. It must
	// return quickly when nothing changed since its last call (the same Catalogue
	// pointers): a rebuild happens for any upstream's change. A Serve it sets should be
	// the same value while its verdict stands, so that what is built from it is kept.
	Vet(fetched []Fetched)
}

// Fetched is one upstream's catalogue as a Vetter sees it.
type Fetched struct {
	Upstream  string
	Info      upstream.Info
	Ready     bool                // the upstream is up (a down upstream's catalogue is empty)
	Catalogue *upstream.Catalogue // as fetched; never modified
	Serve     *upstream.Catalogue // set by Vet: what is served instead; nil serves Catalogue
}

// SetVetter installs what vets catalogues (nil: none). Before Start it only installs it;
// after, the catalogue is rebuilt and clients are told of the lists that came out
// different.
func (r *Router) SetVetter(v Vetter) {
	r.rebuildMu.Lock()
	r.vetter = v
	r.rebuildMu.Unlock()
	if r.started() {
		r.rebuild()
	}
}

// Revet rebuilds the catalogue for a vetter whose verdicts changed (a new lock file, an
// approval): clients are told of the lists that came out different.
func (r *Router) Revet() { r.rebuild() }

// vet returns, per backend of bs, the catalogue to build from.
func vet(v Vetter, bs []*backend) []*upstream.Catalogue {
	fs := make([]Fetched, len(bs))
	for i, b := range bs {
		st, _ := b.up.State()
		fs[i] = Fetched{Upstream: b.name, Info: b.up.Info(), Ready: st == upstream.StateReady, Catalogue: b.up.Catalogue()}
	}
	if v != nil {
		v.Vet(fs)
	}
	out := make([]*upstream.Catalogue, len(bs))
	for i := range fs {
		out[i] = fs[i].Catalogue
		if fs[i].Serve != nil {
			out[i] = fs[i].Serve
		}
	}
	return out
}
