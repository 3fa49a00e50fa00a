package server

import (
	"encoding/base64"
	"testing"
	"time"
)

// TestRequestState checks the proxy-minted requestState handles: they open on the
// connection that minted them until they expire, and a tampered, foreign or expired
// handle is refused.
func TestRequestState(t *testing.T) {
	s := &Server{}
	var conn1, conn2 [16]byte
	conn1[0], conn2[0] = 1, 2
	state := s.mintState(conn1, "alice", 42, time.Now().Add(time.Minute))
	if id, err := s.openState(conn1, "alice", state); err != nil || id != 42 {
		t.Fatalf("open: %d %v", id, err)
	}
	if _, err := s.openState(conn2, "alice", state); err == nil {
		t.Errorf("a handle from another connection was accepted")
	}
	b, _ := base64.RawURLEncoding.DecodeString(state)
	b[7] ^= 1 // another call id
	if _, err := s.openState(conn1, "alice", base64.RawURLEncoding.EncodeToString(b)); err == nil {
		t.Errorf("a tampered handle was accepted")
	}
	expired := s.mintState(conn1, "alice", 42, time.Now().Add(-time.Second))
	if _, err := s.openState(conn1, "alice", expired); err == nil {
		t.Errorf("an expired handle was accepted")
	}
	if _, err := s.openState(conn1, "alice", "not base64 !"); err == nil {
		t.Errorf("garbage accepted")
	}
	if _, err := s.openState(conn1, "mallory", state); err == nil {
		t.Errorf("a handle issued to another principal was accepted")
	}
	other := &Server{}
	if _, err := other.openState(conn1, "alice", state); err == nil {
		t.Errorf("a handle from another proxy process was accepted")
	}
}

// TestWrappedState checks the binding of an upstream's requestState to its principal.
func TestWrappedState(t *testing.T) {
	s := &Server{}
	w := s.wrapState("alice", "upstream-opaque.state")
	if inner, ok := s.unwrapState("alice", w); !ok || inner != "upstream-opaque.state" {
		t.Fatalf("unwrap: %q %v", inner, ok)
	}
	for _, bad := range []string{w + "x", "upstream-opaque.state", "w.", "w.AAAA.upstream-opaque.state"} {
		if _, ok := s.unwrapState("alice", bad); ok {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, ok := s.unwrapState("mallory", w); ok {
		t.Error("another principal replayed alice's state")
	}
}
