package mcp

import "testing"

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
