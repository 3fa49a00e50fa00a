package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestRequestToken: each client authentication method puts the client where RFC 6749
// (and RFC 7523 for private_key_jwt) says; a 200 answer is read as a token response.
func TestRequestToken(t *testing.T) {
	var got http.Header
	var form url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		_ = r.ParseForm()
		form = r.PostForm
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"at","token_type":"Bearer","expires_in":"60","refresh_token":"rt","scope":"a b"}`)
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		c        TokenClient
		basic    bool
		formWant map[string]string
	}{
		{TokenClient{ID: "id:1", Secret: "s&2", Method: AuthBasic}, true, map[string]string{"client_id": "", "client_secret": ""}},
		{TokenClient{ID: "id", Secret: "s", Method: AuthPost}, false, map[string]string{"client_id": "id", "client_secret": "s"}},
		{TokenClient{ID: "id", Method: AuthNone}, false, map[string]string{"client_id": "id", "client_secret": ""}},
		{TokenClient{ID: "id", Method: AuthJWT, Assert: func(endpoint string) (string, error) { return "signed-for-" + endpoint, nil }}, false,
			map[string]string{"client_assertion": "signed-for-" + srv.URL, "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", "client_id": ""}},
	} {
		now := time.Now()
		r, err := RequestToken(ctx, srv.Client(), srv.URL, &tc.c, url.Values{"grant_type": {"refresh_token"}})
		if err != nil {
			t.Fatalf("%s: %v", tc.c.Method, err)
		}
		if r.AccessToken != "at" || r.RefreshToken != "rt" || r.Scope != "a b" || r.Bearer() != nil ||
			r.Expiry(now).Sub(now) != time.Minute {
			t.Errorf("%s: %+v", tc.c.Method, r)
		}
		id, secret, ok := (&http.Request{Header: got}).BasicAuth()
		if ok != tc.basic || (ok && (id != url.QueryEscape("id:1") || secret != url.QueryEscape("s&2"))) {
			t.Errorf("%s: basic auth %v %q %q", tc.c.Method, ok, id, secret)
		}
		for k, want := range tc.formWant {
			if form.Get(k) != want {
				t.Errorf("%s: form %s = %q, want %q", tc.c.Method, k, form.Get(k), want)
			}
		}
		if form.Get("grant_type") != "refresh_token" || got.Get("Content-Type") != "application/x-www-form-urlencoded" {
			t.Errorf("%s: form %v, headers %v", tc.c.Method, form, got)
		}
	}
	if _, err := RequestToken(ctx, srv.Client(), srv.URL, &TokenClient{ID: "id", Method: AuthJWT}, url.Values{}); err == nil {
		t.Error("private_key_jwt without a signer was sent")
	}
	fail := errors.New("no key")
	if _, err := RequestToken(ctx, srv.Client(), srv.URL, &TokenClient{Method: AuthJWT, Assert: func(string) (string, error) { return "", fail }}, url.Values{}); !errors.Is(err, fail) {
		t.Errorf("a failed signature: %v", err)
	}
}

// TestTokenAnswers: a refusal is an *OAuthError with the code and description made one
// bounded line, never the body; a 200 without an access token, or a token that is not a
// bearer token, is an error; expires_in is read as a number or a string.
func TestTokenAnswers(t *testing.T) {
	var status int
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	ctx := context.Background()
	c := &TokenClient{ID: "id", Method: AuthNone}
	status, body = http.StatusBadRequest, `{"error":"invalid_grant","error_description":"the token\nis `+strings.Repeat("é", 150)+`","access_token":"leaked?"}`
	_, err := RequestToken(ctx, srv.Client(), srv.URL, c, url.Values{})
	var oe *OAuthError
	if !errors.As(err, &oe) || oe.Status != 400 || oe.Code != "invalid_grant" || strings.Contains(oe.Description, "\n") ||
		len(oe.Description) > 200+len("…") || !strings.HasPrefix(oe.Description, "the token is é") || !strings.HasSuffix(oe.Description, "é…") {
		t.Fatalf("refusal: %#v", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "token request to "+srv.URL+": HTTP 400: invalid_grant: the token is") || strings.Contains(msg, "leaked") {
		t.Errorf("message %q", msg)
	}
	status, body = http.StatusUnauthorized, `<html>no</html>`
	if _, err := PostTokenForm(ctx, srv.Client(), srv.URL, c, url.Values{}); !errors.As(err, &oe) || oe.Code != "" ||
		err.Error() != "token request to "+srv.URL+": HTTP 401" {
		t.Errorf("a refusal without an OAuth error: %v", err)
	}
	status, body = http.StatusOK, ``
	if b, err := PostTokenForm(ctx, srv.Client(), srv.URL, c, url.Values{}); err != nil || len(b) != 0 {
		t.Errorf("an empty 200 (a revocation's answer): %q %v", b, err)
	}
	if _, err := RequestToken(ctx, srv.Client(), srv.URL, c, url.Values{}); err == nil || !strings.Contains(err.Error(), "has no access_token") {
		t.Errorf("a token answer without a token: %v", err)
	}
	now := time.Now()
	for in, want := range map[string]time.Duration{`3600`: time.Hour, `"90"`: 90 * time.Second, `0`: 0, `""`: 0, `null`: 0, ``: 0} {
		r := &TokenResponse{ExpiresIn: []byte(in)}
		if got := r.Expiry(now); (want == 0 && !got.IsZero()) || (want != 0 && got.Sub(now) != want) {
			t.Errorf("expires_in %s: %v", in, got)
		}
	}
	if (&TokenResponse{TokenType: "N_A"}).Bearer() == nil || (&TokenResponse{TokenType: "bearer"}).Bearer() != nil || (&TokenResponse{}).Bearer() != nil {
		t.Error("Bearer")
	}
	srv.Close()
	if _, err := PostTokenForm(ctx, srv.Client(), srv.URL+"/token?x=1", c, url.Values{"client_secret": {"s3cret"}}); err == nil ||
		!strings.HasPrefix(err.Error(), "token request to "+srv.URL) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), `Post "`) {
		t.Errorf("a transport error: %v", err)
	}
}
