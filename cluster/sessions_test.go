package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
	"github.com/mcp-proxy/mcp-proxy/internal/testing/topology"
)

var (
	keyA = strings.Repeat("a", 32)
	keyB = strings.Repeat("b", 32)
)

func mustSealer(t *testing.T, key string, previous ...string) *Sealer {
	t.Helper()
	s, err := NewSealer(key, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSealRoundTrip: what is sealed comes back, under the owner it was sealed for; the id
// is visible ASCII (a valid Mcp-Session-Id) of a reasonable length, and two ids of the
// same description differ.
func TestSealRoundTrip(t *testing.T) {
	s := mustSealer(t, keyA)
	desc := []byte(`{"v":"2025-11-25","c":{"sampling":{},"elicitation":{}},"i":{"name":"claude-code","version":"2.1.0"},"p":"alice","w":"api_key"}`)
	id, err := s.Seal("0a1b2c3d", desc)
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := s.Seal("0a1b2c3d", desc)
	if id == id2 {
		t.Error("two seals of one description are the same id")
	}
	if !strings.HasPrefix(id, "0a1b2c3d-") {
		t.Errorf("id %q does not start with its owner", id)
	}
	for _, c := range []byte(id) {
		if c < 0x21 || c > 0x7e {
			t.Fatalf("id %q has a byte %#x that is not visible ASCII", id, c)
		}
	}
	if len(id) > 9+base64.RawURLEncoding.EncodedLen(1+12+len(desc)+16) {
		t.Errorf("id of %d bytes for a description of %d", len(id), len(desc))
	}
	owner, got, err := s.Open(id)
	if err != nil || owner != "0a1b2c3d" || !bytes.Equal(got, desc) {
		t.Fatalf("Open = %q %q %v", owner, got, err)
	}
	if _, err := s.Seal("0a1b2c3d", bytes.Repeat([]byte("x"), maxSealed+1)); err == nil {
		t.Error("a description over the bound was sealed")
	}
}

// TestSealRefuses: a tampered id (any byte of it, or its owner prefix changed), one
// sealed with another key, a plain id and garbage are all refused with ErrNotSealed.
func TestSealRefuses(t *testing.T) {
	s := mustSealer(t, keyA)
	id, _ := s.Seal("0a1b2c3d", []byte(`{"v":"2025-06-18"}`))
	bad := []string{
		"0a1b2c3e" + id[8:],                         // another owner: the additional data differs
		"0a1b2c3d-0123456789abcdef0123456789abcdef", // a plain id, minted without a key
		"", "-", "0a1b2c3d-", "0a1b2c3d-!!!!", "nodash",
	}
	for i := 9; i < len(id); i++ { // every character of the sealed part
		b := []byte(id)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		bad = append(bad, string(b))
	}
	other, _ := mustSealer(t, keyB).Seal("0a1b2c3d", []byte(`{"v":"2025-06-18"}`))
	bad = append(bad, other)
	for _, b := range bad {
		if _, _, err := s.Open(b); !errors.Is(err, ErrNotSealed) {
			t.Errorf("Open(%q) = %v, want ErrNotSealed", b, err)
		}
	}
	if _, err := NewSealer(""); err == nil {
		t.Error("a sealer without a key")
	}
}

// TestSealRotation: a replica given a new key and the old one reads ids sealed with
// either and seals with the new one, which a replica with the old key alone cannot read;
// once the old key is dropped its ids are refused.
func TestSealRotation(t *testing.T) {
	old := mustSealer(t, keyA)
	rotated := mustSealer(t, keyB, keyA)
	oldID, _ := old.Seal("r1", []byte("before"))
	newID, _ := rotated.Seal("r2", []byte("after"))
	if _, d, err := rotated.Open(oldID); err != nil || string(d) != "before" {
		t.Errorf("the rotated sealer reads an old id: %q %v", d, err)
	}
	if _, d, err := rotated.Open(newID); err != nil || string(d) != "after" {
		t.Errorf("the rotated sealer reads its own: %q %v", d, err)
	}
	if _, _, err := old.Open(newID); !errors.Is(err, ErrNotSealed) {
		t.Errorf("the old key alone reads a new id: %v", err)
	}
	if _, _, err := mustSealer(t, keyB).Open(oldID); !errors.Is(err, ErrNotSealed) {
		t.Errorf("after the old key is dropped: %v", err)
	}
	rawOld, _ := base64.RawURLEncoding.DecodeString(strings.SplitN(oldID, "-", 2)[1])
	rawNew, _ := base64.RawURLEncoding.DecodeString(strings.SplitN(newID, "-", 2)[1])
	if rawOld[0] == rawNew[0] {
		t.Errorf("both keys have key id %#x", rawOld[0])
	}
}

// newSessions is a replica with adoptable sessions, registered at advertise.
func newSessions(t *testing.T, r *topology.Redis, advertise string, idle time.Duration) (*Forwarder, *Sessions) {
	t.Helper()
	f, err := NewForwarder(&config.Cluster{Redis: r.URL(), Timeout: time.Second, KeyPrefix: "test:"}, advertise, 1<<20,
		zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	s := NewSessions(f, mustSealer(t, keyA), idle)
	f.Start()
	t.Cleanup(func() { f.Close() })
	return f, s
}

// TestClaimRace: when a session's replica is gone, replicas that claim it at once see
// one winner: exactly one is told it holds the session, every other is told which one
// does; only the winner may adopt it, with the state recorded; a claim of a session
// without state (ended) finds nothing; DELETE (Ended) removes the state.
func TestClaimRace(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	r := startRedis(t)
	owner, first := newSessions(t, r, "127.0.0.1:1", time.Minute)
	id := first.NewID([]byte(`{"v":"2025-11-25"}`))
	first.Opened(t.Context(), id)
	first.Changed(id, "debug", []string{"test://static/resource/1"}, []string{"fs__read_file", "github__list_issues"})

	const n = 8
	var replicas []*Sessions
	for range n {
		_, s := newSessions(t, r, "127.0.0.1:1", time.Minute)
		replicas = append(replicas, s)
	}
	holders := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, s := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			h, err := s.claim(context.Background(), id, owner.ID())
			if err != nil {
				t.Error(err)
			}
			holders[i] = h
		}()
	}
	close(start)
	wg.Wait()
	var winner *Sessions
	for i, s := range replicas {
		if holders[i] == s.f.id {
			if winner != nil {
				t.Fatalf("two replicas won the claim: %v", holders)
			}
			winner = s
		}
	}
	if winner == nil {
		t.Fatalf("no replica won the claim: %v", holders)
	}
	for i := range replicas {
		if holders[i] != winner.f.id {
			t.Errorf("replica %d was told %q holds the session, want %q", i, holders[i], winner.f.id)
		}
	}
	for _, s := range replicas {
		_, _, _, _, err := s.Adopt(t.Context(), id)
		if s == winner && err != nil {
			t.Errorf("the winner cannot adopt: %v", err)
		}
		if s != winner && !errors.Is(err, ErrNotAdoptable) {
			t.Errorf("a loser adopts: %v", err)
		}
	}
	desc, level, subs, active, err := winner.Adopt(t.Context(), id)
	if err != nil || string(desc) != `{"v":"2025-11-25"}` || level != "debug" || len(subs) != 1 || subs[0] != "test://static/resource/1" ||
		len(active) != 2 || active[0] != "fs__read_file" || active[1] != "github__list_issues" {
		t.Errorf("Adopt = %s %q %q %q %v", desc, level, subs, active, err)
	}
	// The gone owner's claim is stale: claiming against it again names the winner.
	if h, _ := replicas[0].claim(t.Context(), id, owner.ID()); h != winner.f.id {
		t.Errorf("a second claim against the gone owner: %q", h)
	}
	rc, _ := newClient(t, r)
	ttl := rc.PTTL(t.Context(), winner.Key(id)).Val()
	if ttl <= 0 || ttl > winner.ttl {
		t.Errorf("the session's hash expires in %v, want (0, %v]", ttl, winner.ttl)
	}
	winner.Ended(t.Context(), id)
	if n := rc.Exists(t.Context(), winner.Key(id)).Val(); n != 0 {
		t.Error("the session's state outlived Ended")
	}
	if h, err := replicas[1].claim(t.Context(), id, winner.f.id); h != "" || err != nil {
		t.Errorf("claim of an ended session = %q %v, want nothing", h, err)
	}
	forged := "deadbeef-" + strings.Repeat("A", 40)
	if _, _, _, _, err := winner.Adopt(t.Context(), forged); !errors.Is(err, ErrNotSealed) {
		t.Errorf("Adopt of a forged id: %v", err)
	}
}

// TestForwardAdopts: a request for a session whose owner is gone is declined (for this
// replica to adopt it) by the first replica that claims it, and forwarded to that one by
// another; the claimed replica's answer comes back.
func TestForwardAdopts(t *testing.T) {
	leaktest.Check(t, 5*time.Second)
	r := startRedis(t)
	_, gone := newSessions(t, r, "127.0.0.1:1", time.Minute) // nothing listens there: refused
	id := gone.NewID([]byte(`{"v":"2025-11-25"}`))
	gone.Opened(t.Context(), id)

	served := make(chan string, 4)
	adopterSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		served <- string(b)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer adopterSrv.Close()
	adopter, _ := newSessions(t, r, strings.TrimPrefix(adopterSrv.URL, "http://"), time.Minute)
	other, _ := newSessions(t, r, "127.0.0.1:1", time.Minute)

	post := func(f *Forwarder) (*httptest.ResponseRecorder, bool, *http.Request) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		rec := httptest.NewRecorder()
		return rec, f.Forward(rec, req, id), req
	}
	_, answered, req := post(adopter)
	if answered {
		t.Fatal("the first replica to see the gone owner's session did not keep it to adopt")
	}
	if b, _ := io.ReadAll(req.Body); !strings.Contains(string(b), "initialized") {
		t.Errorf("the declined request's body is not there for the handler: %q", b)
	}
	rec, answered, _ := post(other)
	if !answered || rec.Code != http.StatusAccepted {
		t.Fatalf("another replica: answered %v, HTTP %d", answered, rec.Code)
	}
	if b := <-served; !strings.Contains(b, "initialized") {
		t.Errorf("the adopter got %q", b)
	}
	// A forged id is declined without a claim (404), even with the gone owner's prefix.
	forged := gone.f.id + "-" + strings.Repeat("A", 40)
	if _, answered, _ := post(other); !answered {
		t.Error("the adopted session stopped being forwarded")
	}
	<-served
	req = httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`))
	if other.Forward(httptest.NewRecorder(), req, forged) {
		t.Error("a forged id was forwarded")
	}
}

var benchDesc = []byte(`{"v":"2025-11-25","c":{"sampling":{},"elicitation":{}},"i":{"name":"claude-code","version":"2.1.0"},"p":"alice","w":"api_key"}`)

// BenchmarkSeal: minting a session id (once per initialize).
func BenchmarkSeal(b *testing.B) {
	s, _ := NewSealer(keyA)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Seal("0a1b2c3d", benchDesc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen: reading a session id back (each request a replica forwards, and an
// adoption).
func BenchmarkOpen(b *testing.B) {
	s, _ := NewSealer(keyA)
	id, _ := s.Seal("0a1b2c3d", benchDesc)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Open(id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainID: the random id a session gets without a cluster key, for comparison.
func BenchmarkPlainID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var r [16]byte
		_, _ = rand.Read(r[:])
		_ = "0a1b2c3d-" + hex.EncodeToString(r[:])
	}
}

// FuzzOpen: any session id a client sends is refused or opened without a panic, and
// only an id this sealer made opens.
func FuzzOpen(f *testing.F) {
	s, _ := NewSealer(keyA)
	id, _ := s.Seal("0a1b2c3d", benchDesc)
	f.Add(id)
	f.Add("0a1b2c3d-0123456789abcdef0123456789abcdef")
	f.Add("-")
	f.Add(id[:len(id)-1])
	f.Fuzz(func(t *testing.T, in string) {
		owner, desc, err := s.Open(in)
		if err != nil {
			if !errors.Is(err, ErrNotSealed) || owner != "" || desc != nil {
				t.Fatalf("Open(%q) = %q %q %v", in, owner, desc, err)
			}
			return
		}
		if in != id && !strings.HasPrefix(in, owner+"-") {
			t.Fatalf("Open(%q) opened under owner %q", in, owner)
		}
	})
}
