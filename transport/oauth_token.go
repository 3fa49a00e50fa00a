package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The proxy as an OAuth client at a token endpoint: how it authenticates there, the
// request, and the answers. The upstream's own grant (OAuth) and the per-user
// credentials (package credential: token exchange, authorization codes, refresh,
// revocation) post their forms through PostTokenForm and RequestToken.

// Client authentication methods at a token endpoint (RFC 6749 §2.3.1, RFC 7523 §2.2).
const (
	AuthBasic = "client_secret_basic"
	AuthPost  = "client_secret_post"
	AuthJWT   = "private_key_jwt"
	AuthNone  = "none"
)

// TokenClient is the proxy as a client of one token endpoint.
type TokenClient struct {
	ID     string
	Secret string // AuthBasic, AuthPost
	Method string // AuthBasic, AuthPost, AuthJWT; anything else is AuthNone (client_id in the form)
	// Assert signs the client assertion of AuthJWT for endpoint (RFC 7523 §2.2: iss and
	// sub the client, aud the endpoint); nil for the other methods.
	Assert func(endpoint string) (string, error)
}

// TokenResponse is what a token endpoint answers (RFC 6749 §5.1, RFC 8693 §2.2.1).
type TokenResponse struct {
	AccessToken     string          `json:"access_token"`
	TokenType       string          `json:"token_type"`
	IssuedTokenType string          `json:"issued_token_type"`
	ExpiresIn       json.RawMessage `json:"expires_in"`
	RefreshToken    string          `json:"refresh_token"`
	Scope           string          `json:"scope"`
}

// Expiry is when the response's token expires, its expires_in (a number, or a number in
// a string) after now; zero when it does not say.
func (r *TokenResponse) Expiry(now time.Time) time.Time {
	if n, err := strconv.ParseFloat(strings.Trim(string(r.ExpiresIn), `"`), 64); err == nil && n > 0 {
		return now.Add(time.Duration(n * float64(time.Second)))
	}
	return time.Time{}
}

// Bearer reports an error unless the token is a bearer token (or the answer does not
// say): the only kind the proxy sends. An intermediate token (an ID-JAG's "N_A") is not
// checked with it.
func (r *TokenResponse) Bearer() error {
	if r.TokenType != "" && !strings.EqualFold(r.TokenType, "bearer") {
		return fmt.Errorf("token type %q is not supported", r.TokenType)
	}
	return nil
}

// OAuthError is an authorization server's refusal (RFC 6749 §5.2): the HTTP status and,
// when the body is an OAuth error, its code and description, each one printable line,
// bounded. The body itself is never kept: nothing in it can carry a token into a log.
type OAuthError struct {
	Endpoint    string
	Status      int
	Code        string // "invalid_grant", ...; "" when the body is no OAuth error
	Description string
}

func (e *OAuthError) Error() string {
	return fmt.Sprintf("token request to %s: HTTP %d%s", e.Endpoint, e.Status, errorText(e.Code, e.Description))
}

// maxTokenAnswer bounds a token endpoint's answer.
const maxTokenAnswer = 1 << 20

// PostTokenForm posts form to endpoint as client c and returns the body of a 200
// answer; another status is an *OAuthError. c's authentication goes into the form
// (AuthPost, AuthJWT, AuthNone) or the Authorization header (AuthBasic). A transport
// error names the endpoint and its cause, not the request.
func PostTokenForm(ctx context.Context, hc *http.Client, endpoint string, c *TokenClient, form url.Values) ([]byte, error) {
	switch c.Method {
	case AuthPost:
		form.Set("client_id", c.ID)
		form.Set("client_secret", c.Secret)
	case AuthJWT:
		if c.Assert == nil {
			return nil, errors.New("private_key_jwt without a key to sign the client assertion")
		}
		a, err := c.Assert(endpoint)
		if err != nil {
			return nil, fmt.Errorf("signing the client assertion: %w", err)
		}
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", a)
	case AuthBasic:
	default:
		form.Set("client_id", c.ID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if c.Method == AuthBasic {
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret)) // RFC 6749 §2.3.1
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token request to %s: %w", endpoint, RedactURLError(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxTokenAnswer))
	if resp.StatusCode != http.StatusOK {
		oe := &OAuthError{Endpoint: endpoint, Status: resp.StatusCode}
		oe.Code, oe.Description = oauthError(b)
		return nil, oe
	}
	return b, nil
}

// RequestToken posts form to endpoint as client c (PostTokenForm) and reads the token
// response, which must hold an access token.
func RequestToken(ctx context.Context, hc *http.Client, endpoint string, c *TokenClient, form url.Values) (*TokenResponse, error) {
	b, err := PostTokenForm(ctx, hc, endpoint, c, form)
	if err != nil {
		return nil, err
	}
	var r TokenResponse
	if err := json.Unmarshal(b, &r); err != nil || r.AccessToken == "" {
		return nil, fmt.Errorf("token request to %s: the answer has no access_token", endpoint)
	}
	return &r, nil
}

// RedactURLError keeps a transport error's cause without the request it was for (a
// *url.Error names the URL only, but nothing of a form is ever in it either way).
func RedactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// oauthError reads an OAuth error body's code and description, each one printable
// line, bounded; "" when b is no OAuth error.
func oauthError(b []byte) (code, description string) {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		return "", ""
	}
	return OneLine(e.Error, 64), OneLine(e.Description, 200)
}

// errorText is ": code: description" (": code" without a description), or "".
func errorText(code, description string) string {
	switch {
	case code == "":
		return ""
	case description == "":
		return ": " + code
	}
	return ": " + code + ": " + description
}

// oauthErrorText is ": error: description" of an OAuth error body, or "".
func oauthErrorText(b []byte) string { return errorText(oauthError(b)) }

// OneLine makes s one printable line of at most n bytes (and an ellipsis): for what a
// remote server wrote that goes into an error or a page.
func OneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n-- // not inside a character
		}
		s = s[:n] + "…"
	}
	return s
}
