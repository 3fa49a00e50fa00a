package credential

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Client authentication methods at a token endpoint.
const (
	AuthBasic = "client_secret_basic"
	AuthPost  = "client_secret_post"
	AuthJWT   = "private_key_jwt"
	AuthNone  = "none"
)

// Client is the proxy as a client of one token endpoint: how it authenticates there.
type Client struct {
	ID     string
	Secret string // client_secret_basic, client_secret_post
	Method string // AuthBasic, AuthPost, AuthJWT or AuthNone
	// Key signs the client assertion of private_key_jwt (RFC 7523 §2.2): an RSA, ECDSA
	// (P-256, P-384, P-521) or Ed25519 private key; see LoadPrivateKey.
	Key   crypto.Signer
	KeyID string // the kid of the assertion's header; "" for none
}

// LoadPrivateKey reads a PEM private key (PKCS#8, PKCS#1 or SEC 1) for private_key_jwt.
// Like the secrets file, it is refused when its group or others may read it.
func LoadPrivateKey(path string) (crypto.Signer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading the private key: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("the private key %s may be read or written by others than its owner (mode %04o): refusing it; chmod 600 it", path, perm)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the private key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("the private key %s is not PEM", path)
	}
	var k any
	switch blk.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("the private key %s is a PEM %q block, not a private key", path, blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("the private key %s: %w", path, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the private key %s cannot sign", path)
	}
	return s, nil
}

// algorithm is the JWS algorithm of key.
func algorithm(key crypto.Signer) (jose.SignatureAlgorithm, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return jose.RS256, nil
	case *ecdsa.PrivateKey:
		switch k.Curve.Params().BitSize {
		case 256:
			return jose.ES256, nil
		case 384:
			return jose.ES384, nil
		case 521:
			return jose.ES512, nil
		}
	case ed25519.PrivateKey:
		return jose.EdDSA, nil
	}
	return "", errors.New("unsupported private key type")
}

// assertion is the client assertion of private_key_jwt for endpoint: iss and sub the
// client, aud the endpoint, a fresh jti, valid for a minute.
func (c *Client) assertion(endpoint string) (string, error) {
	alg, err := algorithm(c.Key)
	if err != nil {
		return "", err
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if c.KeyID != "" {
		opts = opts.WithHeader("kid", c.KeyID)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: c.Key}, opts)
	if err != nil {
		return "", err
	}
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": c.ID, "sub": c.ID, "aud": endpoint, "jti": base64.RawURLEncoding.EncodeToString(jti),
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
	jws, err := signer.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// tokenResponse is what a token endpoint answers (RFC 6749 §5.1, RFC 8693 §2.2.1).
type tokenResponse struct {
	AccessToken     string          `json:"access_token"`
	TokenType       string          `json:"token_type"`
	IssuedTokenType string          `json:"issued_token_type"`
	ExpiresIn       json.RawMessage `json:"expires_in"`
	RefreshToken    string          `json:"refresh_token"`
	Scope           string          `json:"scope"`
}

// expiry is when the response's token expires (zero: unknown).
func (r *tokenResponse) expiry(now time.Time) time.Time {
	if n, err := strconv.ParseFloat(strings.Trim(string(r.ExpiresIn), `"`), 64); err == nil && n > 0 {
		return now.Add(time.Duration(n * float64(time.Second)))
	}
	return time.Time{}
}

// maxTokenResponse bounds a token endpoint's answer.
const maxTokenResponse = 1 << 20

// tokenRequest posts form to endpoint as client c and returns the token response. Its
// errors quote the OAuth error code and description only, never the response body:
// nothing there can carry a token into a log.
func tokenRequest(ctx context.Context, hc *http.Client, endpoint string, c *Client, form url.Values) (*tokenResponse, error) {
	switch c.Method {
	case AuthPost:
		form.Set("client_id", c.ID)
		form.Set("client_secret", c.Secret)
	case AuthJWT:
		a, err := c.assertion(endpoint)
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
		return nil, fmt.Errorf("token request to %s: %w", endpoint, redactURLError(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("token request to %s: HTTP %d%s", endpoint, resp.StatusCode, oauthErrorText(b))
	}
	var r tokenResponse
	if err := json.Unmarshal(b, &r); err != nil || r.AccessToken == "" {
		return nil, fmt.Errorf("token request to %s: the answer has no access_token", endpoint)
	}
	return &r, nil
}

// redactURLError keeps a transport error's cause without the request it was for (a
// *url.Error names the URL only, but nothing of the form is ever in it either way).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// oauthErrorText is ": error: description" of an OAuth error body (each bounded, one
// line), or "".
func oauthErrorText(b []byte) string {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		return ""
	}
	clean := func(s string, n int) string {
		s = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return ' '
			}
			return r
		}, s)
		if len(s) > n {
			s = s[:n] + "…"
		}
		return s
	}
	if e.Description != "" {
		return ": " + clean(e.Error, 64) + ": " + clean(e.Description, 200)
	}
	return ": " + clean(e.Error, 64)
}
