//go:build unix

package router

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/credential"
	"github.com/mcp-proxy/mcp-proxy/jsonrpc"
	"github.com/mcp-proxy/mcp-proxy/mcp"
	"github.com/mcp-proxy/mcp-proxy/principal"
)

// countingStore counts the reads of a store, to show that a cached credential reads none.
type countingStore struct {
	credential.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, up, p string) (*credential.Grant, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, up, p)
}

// BenchmarkPerPrincipalCall is BenchmarkHotPath's call to a per-principal upstream whose
// principal's credential is cached (mode "exchange", the token in this process), against
// the same call to a shared upstream: the difference is the per-user credential's cost
// per call (Admit, the principal's session looked up). The HTTP request's Authorization
// is BenchmarkAuthorizationCached (package credential). No store is read in the loop.
func BenchmarkPerPrincipalCall(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":"req-12345","method":"tools/call","params":{"name":"gh__t","arguments":{"owner":"modelcontextprotocol","repo":"go-sdk","title":"A bug report","body":"Steps to reproduce: run the proxy, call a tool, observe the result."},"_meta":{"progressToken":"abc"}}}`)
	// As the front end makes them: the principal identified once, its session's meta
	// (whose capabilities key is computed once) on every call.
	alice := (&principal.Principal{Name: "alice", Via: principal.ViaJWT, Issuer: "https://idp.example", Token: principal.NewSecret("front-token")}).Identify()
	meta := &ClientMeta{Capabilities: json.RawMessage(`{"sampling":{}}`)}
	run := func(b *testing.B, r *Router) {
		var out []byte
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime()
		for i := 0; i < b.N; i++ {
			msg, err := jsonrpc.Decode(line)
			if err != nil {
				b.Fatal(err)
			}
			r.Dispatch(ctx, &Request{Method: msg.Method, Params: msg.Params, Principal: alice, Meta: meta}, func(res json.RawMessage, err error) {
				if err != nil {
					b.Fatal(err)
				}
				out, err = jsonrpc.NewResult(msg.ID, res).Append(out[:0])
				if err != nil {
					b.Fatal(err)
				}
			})
		}
		b.StopTimer()
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}
	b.Run("shared", func(b *testing.B) {
		run(b, newTestRouter(b, Options{}, nsUp{newFake("gh", "t"), "gh"}))
	})
	b.Run("per-principal-cached", func(b *testing.B) {
		store := &countingStore{Store: credential.NewMemoryStore()}
		now := time.Now()
		store.Put(context.Background(), &credential.Grant{Upstream: "gh", Principal: alice.ID(), Mode: credential.ModeExchange,
			AccessToken: principal.NewSecret("upstream-token"), Expiry: now.Add(time.Hour), Updated: now})
		prov, err := credential.NewProvider(credential.Config{Upstream: "gh", Mode: credential.ModeExchange, Exchange: &credential.ExchangeConfig{
			TokenEndpoint: "http://127.0.0.1:1/token", Client: credential.Client{ID: "proxy"}, Resource: "https://gh.example/mcp"}},
			credential.Deps{Store: store, Log: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		r, _ := perPrincipalRouter(b, func(ctx context.Context, req *Request, params json.RawMessage) (Admission, error) {
			a, err := prov.Admit(ctx, req.Principal, credential.Call{Method: req.Method, Params: params, Modern: req.Modern})
			if err != nil {
				return Admission{}, err
			}
			return Admission{Params: a.Params, Mode: prov.Mode(), Subject: a.Subject}, nil
		})
		if _, err := prov.Admit(context.Background(), alice, credential.Call{Method: mcp.MethodToolsCall}); err != nil {
			b.Fatal(err) // the one miss: the store is read
		}
		reads := store.gets.Load()
		run(b, r)
		if n := store.gets.Load() - reads; n != 0 {
			b.Fatalf("%d store reads on cache hits", n)
		}
	})
}

// cpuTime is the CPU time (user and system) the process has used, in nanoseconds: less
// disturbed than wall time by other processes on a shared machine.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
