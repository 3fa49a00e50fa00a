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
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcp-proxy/mcp-proxy/transport"
)

// Client authentication methods at a token endpoint (transport's).
const (
	AuthBasic = transport.AuthBasic
	AuthPost  = transport.AuthPost
	AuthJWT   = transport.AuthJWT
	AuthNone  = transport.AuthNone
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

// tokenClient is c as transport's token requests take it: with its assertion signer
// for private_key_jwt.
func (c *Client) tokenClient() *transport.TokenClient {
	tc := &transport.TokenClient{ID: c.ID, Secret: c.Secret, Method: c.Method}
	if c.Method == AuthJWT {
		tc.Assert = c.assertion
	}
	return tc
}

// tokenRequest posts form to endpoint as client c and returns the token response. Its
// errors quote the OAuth error code and description only (a *transport.OAuthError),
// never the response body: nothing there can carry a token into a log.
func tokenRequest(ctx context.Context, hc *http.Client, endpoint string, c *Client, form url.Values) (*transport.TokenResponse, error) {
	return transport.RequestToken(ctx, hc, endpoint, c.tokenClient(), form)
}

// oauthErrorCode is the OAuth error code of a token endpoint's refusal ("invalid_grant"),
// or "".
func oauthErrorCode(err error) string {
	var oe *transport.OAuthError
	if errors.As(err, &oe) {
		return oe.Code
	}
	return ""
}
