package router

import (
	"encoding/json"
	"testing"
)

func TestSizes(t *testing.T) {
	a := newFake("a", "one", "two", "shared")
	a.cat.Prompts = []json.RawMessage{json.RawMessage(`{"name":"p"}`)}
	a.cat.Resources = []json.RawMessage{json.RawMessage(`{"uri":"mem://a/1","name":"r"}`), json.RawMessage(`{"uri":"mem://a/2","name":"r2"}`)}
	a.cat.Templates = []json.RawMessage{json.RawMessage(`{"uriTemplate":"mem://a/{x}","name":"t"}`)}
	b := newFake("b", "shared")
	c := newFake("c")
	r := newTestRouter(t, Options{}, nsUp{a, "a"}, nsUp{b, "b"}, nsUp{c, "c"})
	got := r.Sizes()
	want := []Sizes{
		{Upstream: "a", Tools: 3, Prompts: 1, Resources: 2, Templates: 1},
		{Upstream: "b", Tools: 1},
		{Upstream: "c"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sizes[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
