package server

import (
	"encoding/base64"
	"errors"
	"strings"
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
	state := s.mintState(conn1, "", "alice", 42, time.Now().Add(time.Minute))
	if id, err := s.openState(conn1, "", "alice", state); err != nil || id != 42 {
		t.Fatalf("open: %d %v", id, err)
	}
	if _, err := s.openState(conn2, "", "alice", state); err == nil {
		t.Errorf("a handle from another connection was accepted")
	}
	b, _ := base64.RawURLEncoding.DecodeString(state)
	b[7] ^= 1 // another call id
	if _, err := s.openState(conn1, "", "alice", base64.RawURLEncoding.EncodeToString(b)); err == nil {
		t.Errorf("a tampered handle was accepted")
	}
	expired := s.mintState(conn1, "", "alice", 42, time.Now().Add(-time.Second))
	if _, err := s.openState(conn1, "", "alice", expired); err == nil {
		t.Errorf("an expired handle was accepted")
	}
	if _, err := s.openState(conn1, "", "alice", "not base64 !"); err == nil {
		t.Errorf("garbage accepted")
	}
	if _, err := s.openState(conn1, "", "mallory", state); err == nil {
		t.Errorf("a handle issued to another principal was accepted")
	}
	other := &Server{}
	if _, err := other.openState(conn1, "", "alice", state); err == nil {
		t.Errorf("a handle from another proxy process was accepted")
	}
}

// TestRequestStateReplica checks the handles of a replica in a cluster: they name it,
// open there only, and the name is covered by the MAC; other replicas tell them apart
// (errOtherReplica, so that the retry is forwarded) from handles that are no good.
func TestRequestStateReplica(t *testing.T) {
	s := &Server{}
	var conn [16]byte
	state := s.mintState(conn, "r0a1b2c3", "alice", 42, time.Now().Add(time.Minute))
	if got := stateReplica(state); got != "r0a1b2c3" {
		t.Fatalf("stateReplica(%q) = %q", state, got)
	}
	if id, err := s.openState(conn, "r0a1b2c3", "alice", state); err != nil || id != 42 {
		t.Fatalf("open at its replica: %d %v", id, err)
	}
	if _, err := s.openState(conn, "ffff0000", "alice", state); !errors.Is(err, errOtherReplica) {
		t.Errorf("open at another replica: %v, want errOtherReplica", err)
	}
	if _, err := s.openState(conn, "", "alice", state); !errors.Is(err, errOtherReplica) {
		t.Errorf("open outside a cluster: %v, want errOtherReplica", err)
	}
	// Renamed to another replica: that replica's check of the MAC refuses it.
	renamed := "r.ffff0000." + strings.TrimPrefix(state, "r.r0a1b2c3.")
	if _, err := s.openState(conn, "ffff0000", "alice", renamed); err == nil || errors.Is(err, errOtherReplica) {
		t.Errorf("a handle renamed to another replica was accepted there: %v", err)
	}
	// A handle without a replica is not one a replica mints.
	plain := s.mintState(conn, "", "alice", 42, time.Now().Add(time.Minute))
	if _, err := s.openState(conn, "r0a1b2c3", "alice", plain); err == nil {
		t.Errorf("a replica accepted a handle that names none")
	}
	for _, st := range []string{"", plain, "w.abc.def", "r.", "r.nodot", s.wrapState("alice", "x")} {
		if got := stateReplica(st); got != "" {
			t.Errorf("stateReplica(%q) = %q, want none", st, got)
		}
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
