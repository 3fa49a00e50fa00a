package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// -tls: every upstream serving HTTP serves HTTPS instead (HTTP/2 offered by ALPN), with a
// self-signed loopback certificate made for the run; the proxies and floor forwarders
// trust it through SSL_CERT_FILE, mcp-bench through its own pool. The proxies' front
// ends stay plain HTTP: what is measured is the HTTPS upstream leg.

// tlsFiles is the run's certificate.
type tlsFiles struct {
	certFile, keyFile string
	roots             *x509.CertPool
	stats             *http.Client // reads the upstreams' /stats over https
}

// pool returns the roots to trust; nil (the system's) without -tls.
func (t *tlsFiles) pool() *x509.CertPool {
	if t == nil {
		return nil
	}
	return t.roots
}

// makeLoopbackCert writes a self-signed certificate for 127.0.0.1, ::1 and localhost,
// valid for a day, and its key, into dir.
func makeLoopbackCert(dir string) (*tlsFiles, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "mcp-bench loopback"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("making the TLS certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	f := &tlsFiles{certFile: filepath.Join(dir, "loopback-cert.pem"), keyFile: filepath.Join(dir, "loopback-key.pem")}
	if err := os.WriteFile(f.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	f.roots = x509.NewCertPool()
	f.roots.AddCert(cert)
	f.stats = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.roots}}}
	return f, nil
}

// statsClient returns the client that reads the upstreams' /stats; nil (the plain one)
// without -tls.
func (t *tlsFiles) statsClient() *http.Client {
	if t == nil {
		return nil
	}
	return t.stats
}
