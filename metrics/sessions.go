package metrics

import (
	"errors"
	"net"
	"sort"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/server"
)

// Eras of a client session, as the era label names them.
const (
	EraLegacy = "legacy" // initialize and a session (protocol versions up to 2025-11-25)
	EraModern = "modern" // stateless 2026-07-28: no session, so never counted as one today
)

type sessionKey struct{ era, transport string }

var _ server.SessionObserver = (*Metrics)(nil)

// SessionEvent implements server.SessionObserver: client sessions open, by era and
// transport. Modern clients have no sessions, so the front end reports none for them.
func (m *Metrics) SessionEvent(e server.SessionEvent) {
	k := sessionKey{era: EraLegacy, transport: e.Transport}
	if mcp.IsModernVersion(e.Version) {
		k.era = EraModern
	}
	m.sessMu.Lock()
	switch e.Kind {
	case server.SessionOpened:
		m.sessions[k]++
	case server.SessionClosed:
		if m.sessions[k] > 0 {
			m.sessions[k]--
		}
	}
	m.sessMu.Unlock()
	if e.Kind == server.SessionOpened {
		m.sessionsOpened.WithLabelValues(k.era, k.transport).Inc()
	}
}

// SessionCount is how many client sessions of one era and transport are open.
type SessionCount struct {
	Era       string `json:"era"`
	Transport string `json:"transport"`
	Open      int    `json:"open"`
}

// Sessions returns the open client sessions by era and transport, sorted; a pair whose
// sessions all closed is listed with 0.
func (m *Metrics) Sessions() []SessionCount {
	m.sessMu.Lock()
	out := make([]SessionCount, 0, len(m.sessions))
	for k, n := range m.sessions {
		out = append(out, SessionCount{Era: k.era, Transport: k.transport, Open: n})
	}
	m.sessMu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Era != out[j].Era {
			return out[i].Era < out[j].Era
		}
		return out[i].Transport < out[j].Transport
	})
	return out
}

// CountConnections returns ln counting the connections it accepts (the front end's HTTP
// connections): mcp_proxy_frontend_connections (open) and
// mcp_proxy_frontend_connections_total (accepted). A connection counts as open until it
// is closed.
func (m *Metrics) CountConnections(ln net.Listener) net.Listener {
	return &countingListener{Listener: ln, m: m}
}

type countingListener struct {
	net.Listener
	m *Metrics
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.m.conns.Add(1)
	l.m.connsSeen.Add(1)
	return &countedConn{Conn: c, m: l.m}, nil
}

// countedConn is an accepted connection that uncounts itself when closed.
type countedConn struct {
	net.Conn
	m    *Metrics
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.m.conns.Add(-1) })
	return c.Conn.Close()
}

// CloseWrite half-closes the connection when the underlying one can (a TCP connection),
// as the HTTP server does before a lingering close.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
