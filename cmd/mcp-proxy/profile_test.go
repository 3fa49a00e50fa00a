package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestPprofEndpoints checks the debug listener's own pprof handlers over a real socket:
// the index, named profiles in text and binary form, the symbol lookup go tool pprof
// uses, the command line, and clear errors for what they do not serve.
func TestPprofEndpoints(t *testing.T) {
	srv := httptest.NewServer(pprofMux())
	defer srv.Close()
	get := func(method, path, body string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, b
	}

	code, _, body := get("GET", "/debug/pprof/", "")
	if code != 200 || !bytes.Contains(body, []byte(`href="goroutine?debug=1"`)) || !bytes.Contains(body, []byte(`href="heap?debug=1"`)) {
		t.Errorf("index: %d %s", code, body)
	}
	code, h, body := get("GET", "/debug/pprof/goroutine?debug=1", "")
	if code != 200 || !bytes.HasPrefix(body, []byte("goroutine profile: total ")) || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Errorf("goroutine?debug=1: %d %q %.80s", code, h.Get("Content-Type"), body)
	}
	code, h, body = get("GET", "/debug/pprof/heap?gc=1", "")
	if code != 200 || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) || h.Get("Content-Disposition") != `attachment; filename="heap"` {
		t.Errorf("heap: %d %q, want a gzipped profile", code, h.Get("Content-Disposition"))
	}
	code, _, body = get("GET", "/debug/pprof/nosuch", "")
	if code != 404 || !bytes.Contains(body, []byte("Unknown profile: nosuch")) {
		t.Errorf("unknown profile: %d %s", code, body)
	}
	code, _, body = get("GET", "/debug/pprof/heap?seconds=5", "")
	if code != 400 || !bytes.Contains(body, []byte("-diff_base")) {
		t.Errorf("delta profile: %d %s", code, body)
	}
	code, _, body = get("GET", "/debug/pprof/profile?seconds=x", "")
	if code != 400 || !bytes.Contains(body, []byte(`bad seconds "x"`)) {
		t.Errorf("bad seconds: %d %s", code, body)
	}
	code, _, body = get("GET", "/debug/pprof/cmdline", "")
	if code != 200 || string(body) != strings.Join(os.Args, "\x00") {
		t.Errorf("cmdline: %d %q", code, body)
	}

	pc := reflect.ValueOf(pprofSymbol).Pointer()
	code, _, body = get("GET", "/debug/pprof/symbol", "")
	if code != 200 || string(body) != "num_symbols: 1\n" {
		t.Errorf("symbol GET: %d %q", code, body)
	}
	code, _, body = get("POST", "/debug/pprof/symbol", fmt.Sprintf("%#x+0x0+junk", pc))
	want := fmt.Sprintf("num_symbols: 1\n%#x %s\n", pc, runtime.FuncForPC(pc).Name())
	if code != 200 || string(body) != want {
		t.Errorf("symbol POST: %d %q, want %q", code, body, want)
	}

	code, h, body = get("GET", "/debug/pprof/profile?seconds=0.2", "")
	if code != 200 || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) || h.Get("Content-Disposition") != `attachment; filename="profile"` {
		t.Errorf("CPU profile: %d %q", code, h.Get("Content-Disposition"))
	}
	code, _, body = get("GET", "/debug/pprof/trace?seconds=0.1", "")
	if code != 200 || !bytes.HasPrefix(body, []byte("go 1.")) {
		t.Errorf("trace: %d %.20q", code, body)
	}
}
