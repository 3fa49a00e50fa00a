package authserver

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// A small JWT implementation, ES256 and RS256, with the standard library only: the test
// server must not share code with what it tests.

var b64 = base64.RawURLEncoding

// Claims are a JWT's claims.
type Claims map[string]any

// Str returns claim k as a string ("" when absent or not a string).
func (c Claims) Str(k string) string { s, _ := c[k].(string); return s }

// Num returns claim k as a number (0 when absent).
func (c Claims) Num(k string) int64 {
	f, _ := c[k].(float64)
	return int64(f)
}

// HasAud reports whether the aud claim (a string or a list) holds aud.
func (c Claims) HasAud(aud string) bool {
	switch v := c["aud"].(type) {
	case string:
		return v == aud
	case []any:
		for _, x := range v {
			if s, _ := x.(string); s == aud {
				return true
			}
		}
	}
	return false
}

// signES256 makes a compact JWS of claims with key, with typ and kid in the header.
func signES256(key *ecdsa.PrivateKey, kid, typ string, claims Claims) string {
	hdr, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": typ, "kid": kid})
	body, _ := json.Marshal(claims)
	input := b64.EncodeToString(hdr) + "." + b64.EncodeToString(body)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64.EncodeToString(sig)
}

// header is the part of a JWS header read here.
type header struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

// parse splits a compact JWS, without checking its signature.
func parse(tok string) (header, Claims, []byte, string, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return header{}, nil, nil, "", errors.New("not a compact JWS")
	}
	hb, err1 := b64.DecodeString(parts[0])
	cb, err2 := b64.DecodeString(parts[1])
	sig, err3 := b64.DecodeString(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return header{}, nil, nil, "", errors.New("bad base64url")
	}
	var h header
	var c Claims
	if json.Unmarshal(hb, &h) != nil || json.Unmarshal(cb, &c) != nil {
		return header{}, nil, nil, "", errors.New("bad JSON")
	}
	return h, c, sig, parts[0] + "." + parts[1], nil
}

// verify checks tok's signature with pub (an *ecdsa.PublicKey for ES256, an
// *rsa.PublicKey for RS256) and returns its header and claims.
func verify(tok string, pub crypto.PublicKey) (header, Claims, error) {
	h, c, sig, input, err := parse(tok)
	if err != nil {
		return h, nil, err
	}
	sum := sha256.Sum256([]byte(input))
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if h.Alg != "ES256" || len(sig) != 64 {
			return h, nil, fmt.Errorf("alg %s with an EC key", h.Alg)
		}
		if !ecdsa.Verify(k, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			return h, nil, errors.New("bad signature")
		}
	case *rsa.PublicKey:
		if h.Alg != "RS256" {
			return h, nil, fmt.Errorf("alg %s with an RSA key", h.Alg)
		}
		if rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) != nil {
			return h, nil, errors.New("bad signature")
		}
	default:
		return h, nil, errors.New("unsupported key")
	}
	return h, c, nil
}

// jwk is the public JWK of an ES256 key.
func jwk(pub *ecdsa.PublicKey, kid string) map[string]string {
	x, y := make([]byte, 32), make([]byte, 32)
	pub.X.FillBytes(x)
	pub.Y.FillBytes(y)
	return map[string]string{"kty": "EC", "crv": "P-256", "x": b64.EncodeToString(x), "y": b64.EncodeToString(y),
		"kid": kid, "alg": "ES256", "use": "sig"}
}

// ParseJWK reads an EC P-256 public JWK (as /jwks serves it).
func ParseJWK(m map[string]string) (*ecdsa.PublicKey, error) {
	if m["kty"] != "EC" || m["crv"] != "P-256" {
		return nil, errors.New("not an EC P-256 key")
	}
	x, err1 := b64.DecodeString(m["x"])
	y, err2 := b64.DecodeString(m["y"])
	if err1 != nil || err2 != nil {
		return nil, errors.New("bad coordinates")
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
	if !pub.Curve.IsOnCurve(pub.X, pub.Y) {
		return nil, errors.New("point not on the curve")
	}
	return pub, nil
}
