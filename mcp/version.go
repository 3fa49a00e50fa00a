package mcp

// Published protocol versions of the legacy era (initialize handshake), newest first.
var legacyVersions = [...]string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// LatestLegacyVersion is the newest version that uses the initialize handshake.
const LatestLegacyVersion = "2025-11-25"

// LegacyVersions returns the supported legacy versions, newest first.
func LegacyVersions() []string { return append([]string(nil), legacyVersions[:]...) }

// IsLegacyVersion reports whether v is a supported legacy protocol version.
func IsLegacyVersion(v string) bool {
	for _, s := range legacyVersions {
		if s == v {
			return true
		}
	}
	return false
}

// NegotiateLegacy answers a client's initialize: the requested version when supported,
// otherwise the latest one the proxy supports (the client then decides whether to go on).
func NegotiateLegacy(requested string) string {
	if IsLegacyVersion(requested) {
		return requested
	}
	return LatestLegacyVersion
}

// VersionAtLeast reports whether version v is the same as or newer than min. Versions are
// dates, so they compare as strings.
func VersionAtLeast(v, min string) bool { return v >= min }

// ModernVersion is the protocol version of the stateless (modern) era the proxy speaks.
const ModernVersion = "2026-07-28"

// IsModernVersion reports whether v is a supported modern protocol version.
func IsModernVersion(v string) bool { return v == ModernVersion }

// SupportedVersions returns every version the proxy serves, newest first.
func SupportedVersions() []string { return append([]string{ModernVersion}, legacyVersions[:]...) }
