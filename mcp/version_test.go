package mcp

import (
	"encoding/json"
	"testing"
)

func TestNegotiateLegacy(t *testing.T) {
	for req, want := range map[string]string{
		"2024-11-05": "2024-11-05",
		"2025-03-26": "2025-03-26",
		"2025-06-18": "2025-06-18",
		"2025-11-25": "2025-11-25",
		"2026-07-28": LatestLegacyVersion, // modern clients use server/discover instead
		"1999-01-01": LatestLegacyVersion,
		"":           LatestLegacyVersion,
	} {
		if got := NegotiateLegacy(req); got != want {
			t.Errorf("NegotiateLegacy(%q) = %q, want %q", req, got, want)
		}
	}
	if !VersionAtLeast("2025-11-25", "2025-06-18") || VersionAtLeast("2024-11-05", "2025-03-26") {
		t.Error("VersionAtLeast")
	}
}

func TestMergeServerCapabilities(t *testing.T) {
	got := string(MergeServerCapabilities([]json.RawMessage{
		json.RawMessage(`{"tools":{},"resources":{"subscribe":false},"experimental":{"x":{}}}`),
		json.RawMessage(`{"prompts":{"listChanged":false},"resources":{"subscribe":true},"logging":{},"tasks":{"list":{},"requests":{"tools":{"call":{}}}}}`),
		nil,
		json.RawMessage(`not json`),
	}))
	want := `{"logging":{},"prompts":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true},"tasks":{"list":{},"requests":{"tools":{"call":{}}}},"tools":{"listChanged":true}}`
	if got != want {
		t.Errorf("merged\n got %s\nwant %s", got, want)
	}
	if got := string(NarrowClientCapabilities(json.RawMessage(`{"roots":{"listChanged":true},"sampling":{},"experimental":{"a":1},"tasks":{}}`))); got != `{"roots":{"listChanged":true},"sampling":{}}` {
		t.Errorf("narrowed: %s", got)
	}
}
