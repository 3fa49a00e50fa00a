package server

// SessionID returns the id the client knows its session by (the Streamable HTTP
// Mcp-Session-Id, or the sessionId of a legacy HTTP+SSE session); "" for a stdio session,
// which has none. A router.Request's Session offers it to the middleware chain: traces
// record it as mcp.session.id.
func (ss *session) SessionID() string { return ss.id }
