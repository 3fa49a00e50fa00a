package server

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/principal"
)

// The legacy HTTP+SSE transport (2024-11-05), for old clients: GET /sse opens the stream
// of everything the server says, its first event names where to POST messages.
const (
	legacySSEPath     = "/sse"
	legacyMessagePath = "/message"
)

// legacySSE opens a legacy HTTP+SSE session: the session's whole output is this stream.
// The session belongs to the principal that opened it, as a Streamable HTTP session
// belongs to the one that initialized it.
func (h *HTTPHandler) legacySSE(w http.ResponseWriter, r *http.Request, endpoint string) {
	hs := h.newHTTPSession("", endpoint)
	if hs == nil {
		http.Error(w, "too many sessions", http.StatusServiceUnavailable)
		return
	}
	hs.sse = true
	hs.ss.transport = TransportSSE
	hs.principal = principal.From(r.Context())
	hs.ss.principal = hs.principal
	id := hs.id
	h.mu.Lock()
	served := h.serves(endpoint) // see initialize
	if served {
		h.sessions[id] = hs
	}
	h.mu.Unlock()
	if !served {
		hs.close()
		http.NotFound(w, r)
		return
	}
	defer func() {
		h.mu.Lock()
		delete(h.sessions, id)
		h.mu.Unlock()
		hs.close()
	}()
	hs.get.es.id = "" // no resumption in the 2024-11-05 transport
	hs.get.serve(w, r, hs.ctx, h.draining, -1, func(out *streamOut) {
		out.event("", "endpoint", []byte(strings.TrimSuffix(r.URL.Path, legacySSEPath)+legacyMessagePath+"?sessionId="+id))
	})
}

// legacyMessage takes one message (or batch) for a legacy HTTP+SSE session; the answer
// goes on the session's stream. The session is found as a Streamable HTTP one is: 404
// when unknown (or not an HTTP+SSE session), 403 when another principal opened it; and
// the message is handled under the principal of this request.
func (h *HTTPHandler) legacyMessage(w http.ResponseWriter, r *http.Request, endpoint string) {
	sid, ok := singleQueryValue(r.URL.RawQuery, "sessionId")
	if !ok {
		http.Error(w, "exactly one sessionId query parameter is required", http.StatusBadRequest)
		return
	}
	hs, status := h.session(sid, true, r, endpoint)
	if hs == nil {
		plainSessionError(w, status)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.opts.MaxBody)+1))
	if err != nil || len(body) > h.opts.MaxBody {
		if err == nil {
			h.s.refused(r.Context(), body, "body too large") // what was read of it: its head
		}
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	hs.ss.handleLine(h.requestContext(hs.ctx, r), bytes.TrimSpace(body))
	w.WriteHeader(http.StatusAccepted)
}

// singleQueryValue returns the value of the query parameter key when the query is well
// formed and names it exactly once: a repeated or unparsable parameter is refused
// rather than read one way here and another by an intermediary.
func singleQueryValue(rawQuery, key string) (string, bool) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil || len(q[key]) != 1 || q[key][0] == "" {
		return "", false
	}
	return q[key][0], true
}
