package cluster

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
)

// TestRedisRestartedEmpty: Redis restarts without persistence under four replicas: a
// holder of a session, the adopter of a session whose owner is gone, a replica that
// holds neither, and the gone owner's registration. Right after, the replica that holds
// neither forwards a request of each session to its holder: of the first by the address
// sealed into its id (the registry is empty), of the second once its adopter has written
// its hash again. Both holders write their sessions' hashes again, with the log level and
// subscriptions they keep, and the adopter's hash still names the adopter.
func TestRedisRestartedEmpty(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	r := startRedis(t)
	served := make(chan string, 8)
	server := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			served <- name + " " + req.Header.Get(OwnerHeader)
			w.WriteHeader(http.StatusAccepted)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	holderF, holder := newSessions(t, r, server("holder"), time.Minute)
	held := holder.NewID([]byte(`{"v":"2025-11-25"}`))
	holder.Opened(t.Context(), held)
	holder.Changed(held, "debug", []string{"test://a"}, []string{"fs__read_file"})

	_, gone := newSessions(t, r, "127.0.0.1:1", time.Minute) // nothing listens there
	orphan := gone.NewID([]byte(`{"v":"2025-11-25"}`))
	gone.Opened(t.Context(), orphan)
	gone.Changed(orphan, "info", nil, nil)
	gone.f.Close() // stopped: it registers and restores nothing any more
	adopterF, adopter := newSessions(t, r, server("adopter"), time.Minute)
	if h, err := adopter.claim(t.Context(), orphan, gone.f.id); err != nil || h != adopterF.id {
		t.Fatalf("claim = %q %v", h, err)
	}
	if _, level, _, _, err := adopter.Adopt(t.Context(), orphan); err != nil || level != "info" {
		t.Fatalf("Adopt = %q %v", level, err)
	}
	adopter.Opened(t.Context(), orphan)
	other, _ := newSessions(t, r, "127.0.0.1:2", time.Minute)

	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, want string }{{held, "holder " + holderF.id}, {orphan, "adopter " + adopterF.id}} {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		rec := httptest.NewRecorder()
		if !other.Forward(rec, req, c.id) || rec.Code != http.StatusAccepted {
			b, _ := io.ReadAll(rec.Body)
			t.Fatalf("a request right after the restart: forwarded %v, HTTP %d %s; want %s's answer", rec.Code != 0, rec.Code, b, c.want)
		}
		if got := <-served; got != c.want {
			t.Errorf("served by %q, want %q", got, c.want)
		}
	}
	rc, _ := newClient(t, r)
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-t.Context().Done():
				t.Fatalf("waiting for %s", what)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	wait("both sessions' hashes written again", func() bool {
		return rc.Exists(t.Context(), holder.Key(held), holder.Key(orphan)).Val() == 2
	})
	if h := rc.HGetAll(t.Context(), holder.Key(held)).Val(); h["o"] != holderF.id || h["l"] != "debug" || h["s"] != `["test://a"]` {
		t.Errorf("the held session's hash written again: %v", h)
	}
	if h := rc.HGetAll(t.Context(), holder.Key(orphan)).Val(); h["o"] != adopterF.id || h["l"] != "info" {
		t.Errorf("the adopted session's hash written again: %v", h)
	}
	if ttl := rc.PTTL(t.Context(), holder.Key(held)).Val(); ttl <= 0 {
		t.Errorf("the hash written again does not expire: %v", ttl)
	}

	// restoreAll never takes a session back from the replica its hash names.
	rc.HSet(t.Context(), holder.Key(held), "o", adopterF.id)
	if n, err := holder.restoreAll(t.Context()); err != nil || n != 0 {
		t.Errorf("restoreAll over another's hash = %d %v", n, err)
	}
	if o := rc.HGet(t.Context(), holder.Key(held), "o").Val(); o != adopterF.id {
		t.Errorf("restoreAll overwrote another replica's hash: o = %q", o)
	}
}

// TestSealedAddress: an id carries its owner's advertised address; an id sealed before
// (the description alone) opens without one; a payload cut short is refused.
func TestSealedAddress(t *testing.T) {
	s := &Sessions{sealer: mustSealer(t, keyA)}
	id, err := s.sealer.Seal("0a1b2c3d", sealedPayload("10.0.0.7:8080", []byte(`{"v":"2025-11-25"}`)))
	if err != nil {
		t.Fatal(err)
	}
	owner, addr, desc, err := s.open(id)
	if err != nil || owner != "0a1b2c3d" || addr != "10.0.0.7:8080" || string(desc) != `{"v":"2025-11-25"}` {
		t.Errorf("open = %q %q %s %v", owner, addr, desc, err)
	}
	old, _ := s.sealer.Seal("0a1b2c3d", []byte(`{"v":"2025-06-18"}`))
	if _, addr, desc, err := s.open(old); err != nil || addr != "" || string(desc) != `{"v":"2025-06-18"}` {
		t.Errorf("open of an id without an address = %q %s %v", addr, desc, err)
	}
	short, _ := s.sealer.Seal("0a1b2c3d", []byte{0, 40, 'x'})
	if _, _, _, err := s.open(short); err == nil {
		t.Error("a payload shorter than its address opened")
	}
}
