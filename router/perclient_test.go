package router

import (
	"encoding/json"
	"testing"
)

func TestCapabilitiesKey(t *testing.T) {
	for caps, want := range map[string]string{
		``:             "-----",
		`{}`:           "-----",
		`{"roots":{}}`: "r----",
		`{"roots":{"listChanged": true},"sampling":{}}`:               "rls--",
		`{"elicitation":{}}`:                                          "---f-",
		`{"elicitation":{"url":{}}}`:                                  "----u",
		`{"elicitation":{"form":{},"url":{}},"experimental":{"x":1}}`: "---fu",
	} {
		if got := CapabilitiesKey(json.RawMessage(caps)); got != want {
			t.Errorf("CapabilitiesKey(%s) = %q, want %q", caps, got, want)
		}
	}
	a := CapabilitiesKey(json.RawMessage(`{"sampling":{},"roots":{"listChanged":true}}`))
	b := CapabilitiesKey(json.RawMessage(`{ "roots" : { "listChanged" : true } , "sampling" : { } }`))
	if a != b {
		t.Errorf("formatting changes the key: %q vs %q", a, b)
	}
}
