package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/searcheval"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// knob is one parameter the tuner moves, with the values it tries.
type knob struct {
	name   string
	values []float64
	ptr    func(p *search.Params) *float64
}

var knobs = []knob{
	{"K1", []float64{0.9, 1.2, 1.6, 2, 3}, func(p *search.Params) *float64 { return &p.K1 }},
	{"Name.Weight", []float64{2, 3, 4, 5, 6}, func(p *search.Params) *float64 { return &p.Name.Weight }},
	{"Name.B", []float64{0, 0.3, 0.6}, func(p *search.Params) *float64 { return &p.Name.B }},
	{"Namespace.Weight", []float64{0.5, 1, 2, 3}, func(p *search.Params) *float64 { return &p.Namespace.Weight }},
	{"Title.Weight", []float64{1, 2, 3}, func(p *search.Params) *float64 { return &p.Title.Weight }},
	{"Desc.B", []float64{0.5, 0.75, 0.9}, func(p *search.Params) *float64 { return &p.Desc.B }},
	{"Param.Weight", []float64{0.3, 0.6, 1}, func(p *search.Params) *float64 { return &p.Param.Weight }},
	{"ParamDesc.Weight", []float64{0.2, 0.35, 0.5, 0.7}, func(p *search.Params) *float64 { return &p.ParamDesc.Weight }},
	{"NameForm.Weight", []float64{0, 1, 2, 4}, func(p *search.Params) *float64 { return &p.NameForm.Weight }},
	{"Related", []float64{0.3, 0.5, 0.7, 1}, func(p *search.Params) *float64 { return &p.Related }},
	{"Abbrev", []float64{0.5, 0.7, 0.85, 1}, func(p *search.Params) *float64 { return &p.Abbrev }},
	{"Service", []float64{0, 0.5, 0.7, 0.85, 1}, func(p *search.Params) *float64 { return &p.Service }},
	{"Prefix", []float64{0, 0.3, 0.5}, func(p *search.Params) *float64 { return &p.Prefix }},
	{"Asking", []float64{0, 0.1, 0.2, 0.3}, func(p *search.Params) *float64 { return &p.Asking }},
	{"Coverage", []float64{0, 0.25, 0.5, 0.75, 1}, func(p *search.Params) *float64 { return &p.Coverage }},
	{"Shape", []float64{0.5, 0.75, 1}, func(p *search.Params) *float64 { return &p.Shape }},
	{"Value", []float64{0.1, 0.3, 0.5}, func(p *search.Params) *float64 { return &p.Value }},
	{"Lexicon", []float64{0, 0.25, 0.5, 0.75, 1}, func(p *search.Params) *float64 { return &p.Lexicon }},
}

// isFixed says whether the -set string names knob name.
func isFixed(set, name string) bool {
	for _, f := range strings.Fields(set) {
		if n, _, _ := strings.Cut(f, "="); n == name {
			return true
		}
	}
	return false
}

// setParams sets the knobs named in s ("K1=2 Name.Weight=4").
func setParams(p *search.Params, s string) error {
	for _, f := range strings.Fields(s) {
		name, val, ok := strings.Cut(f, "=")
		v, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil {
			return fmt.Errorf("-set: %q is not name=number", f)
		}
		found := false
		for _, k := range knobs {
			if k.name == name {
				*k.ptr(p) = v
				found = true
			}
		}
		if !found {
			return fmt.Errorf("-set: no parameter %q", name)
		}
	}
	return nil
}

// objective chooses what the tuner maximises: "mrr" (MRR, then recall@1, then
// recall@5) or "recall" (recall@1 + recall@5, then MRR).
var objective = "mrr"

// better orders results by the objective.
func better(a, b searcheval.Result) bool {
	if objective == "recall" {
		if a.At1+a.At5 != b.At1+b.At5 {
			return a.At1+a.At5 > b.At1+b.At5
		}
		return a.MRR() > b.MRR()
	}
	if a.MRR() != b.MRR() {
		return a.MRR() > b.MRR()
	}
	if a.At1 != b.At1 {
		return a.At1 > b.At1
	}
	return a.At5 > b.At5
}

// tuneParams searches the parameters on the development half only, by coordinate
// descent (each parameter in turn set to its best value, the others fixed, until no
// change helps) from DefaultParams and from random starting points, and prints each
// descent's end with its held-out figures (reported, never used to choose). This is
// how DefaultParams were chosen (docs/search.md).
func tuneParams(out io.Writer, docs []search.Doc, dev, held []searcheval.Query, restarts int, fixed string) error {
	var prev search.Index
	eval := func(p search.Params, qs []searcheval.Query) searcheval.Result {
		ix := search.BM25F{Params: p}.Build(docs, prev)
		prev = ix
		return searcheval.Evaluate(ix, qs)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tried := 0
	var chosen search.Params
	var chosenDev searcheval.Result
	chosenAt := -1
	for r := 0; r <= restarts; r++ {
		p := search.DefaultParams()
		if r > 0 {
			for _, k := range knobs {
				*k.ptr(&p) = k.values[rng.IntN(len(k.values))]
			}
		}
		if err := setParams(&p, fixed); err != nil {
			return err
		}
		best := eval(p, dev)
		for changed := true; changed; {
			changed = false
			for _, k := range knobs {
				if isFixed(fixed, k.name) {
					continue
				}
				cur := *k.ptr(&p)
				for _, v := range k.values {
					if v == cur {
						continue
					}
					q := p
					*k.ptr(&q) = v
					if q.Namespace.Weight >= q.Name.Weight {
						continue // the namespace counts for less than the tool's own name
					}
					tried++
					if res := eval(q, dev); better(res, best) {
						p, best, changed = q, res, true
					}
				}
			}
		}
		if chosenAt < 0 || better(best, chosenDev) {
			chosen, chosenDev, chosenAt = p, best, r
		}
		h := eval(p, held)
		fmt.Fprintf(out, "start %d: dev r@1 %.3f r@5 %.3f mrr %.3f | held r@1 %.3f r@5 %.3f mrr %.3f\n", r,
			best.Recall1(), best.Recall5(), best.MRR(), h.Recall1(), h.Recall5(), h.MRR())
		for _, k := range knobs {
			fmt.Fprintf(out, " %s=%g", k.name, *k.ptr(&p))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "%d settings tried on dev (%d queries); the best on dev is start %d:\n", tried, len(dev), chosenAt)
	for _, k := range knobs {
		fmt.Fprintf(out, " %s=%g", k.name, *k.ptr(&chosen))
	}
	fmt.Fprintln(out)
	return nil
}

// aids are the parts of the ranker beyond BM25F over the name, namespace, title,
// description and parameters, each as the setting that turns it off.
var aids = []struct{ name, off string }{
	{"the WordNet lexicon", "Lexicon=0"},
	{"related verbs (related.go)", "Related=0"},
	{"abbreviations (related.go)", "Abbrev=0"},
	{"services' names shortened", "Service=0"},
	{"shapes", "Shape=0"},
	{"values weighed down", "Value=1"},
	{"asking", "Asking=0"},
	{"coverage", "Coverage=0"},
	{"name forms", "NameForm.Weight=0"},
}

// ablation prints the figures of p and of p with each aid turned off in turn, then
// with all of them off (BM25F alone).
func ablation(out io.Writer, docs []search.Doc, p search.Params, qs, dev, held []searcheval.Query) error {
	var prev search.Index
	row := func(name string, p search.Params) {
		ix := search.BM25F{Params: p}.Build(docs, prev)
		prev = ix
		fmt.Fprintf(out, "| %s |", name)
		for _, set := range [][]searcheval.Query{qs, dev, held} {
			r := searcheval.Evaluate(ix, set)
			fmt.Fprintf(out, " %.3f / %.3f / %.3f |", r.Recall1(), r.Recall5(), r.MRR())
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "| ranker | whole (%d) | dev (%d) | held-out (%d) |\n|---|---|---|---|\n", len(qs), len(dev), len(held))
	row("all (the default)", p)
	none := p
	for _, a := range aids {
		q := p
		if err := setParams(&q, a.off); err != nil {
			return err
		}
		row("all but "+a.name, q)
		if err := setParams(&none, a.off); err != nil {
			return err
		}
	}
	row("BM25F alone (all of them off)", none)
	return nil
}
