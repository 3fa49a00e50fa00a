package router

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// cursorCodec mints and checks the proxy's own pagination cursors. A cursor is opaque to
// clients and tamper-evident: it names the list and an offset into the merged list, under
// an HMAC with a key that lives only in this process (random), or that the replicas of
// one proxy share (Options.CursorKey), so that a cursor from one is good at another.
type cursorCodec struct {
	key []byte
}

// MinKeyLen is the shortest key the router accepts for Options.CursorKey: 32 bytes, the
// size of the HMAC-SHA256 it keys.
const MinKeyLen = 32

// CheckCursorKey reports what is wrong with a CursorKey: empty is fine (a random key per
// process), otherwise it must have at least MinKeyLen bytes. The wiring calls it, so
// that a bad configured key is an error rather than New's panic.
func CheckCursorKey(key []byte) error {
	if len(key) > 0 && len(key) < MinKeyLen {
		return fmt.Errorf("cursor key: %d bytes, need at least %d (or none for a random key)", len(key), MinKeyLen)
	}
	return nil
}

func newCursorCodec(key []byte) *cursorCodec {
	if len(key) > 0 {
		return &cursorCodec{key: bytes.Clone(key)}
	}
	c := &cursorCodec{key: make([]byte, MinKeyLen)}
	// Since Go 1.24 crypto/rand.Read never returns an error (it aborts the program
	// if the system's random source fails), so there is nothing to handle.
	_, _ = rand.Read(c.key)
	return c
}

const cursorMACLen = 10

var errBadCursor = errors.New("invalid cursor")

func (c *cursorCodec) encode(list byte, offset int) string {
	var b [5 + cursorMACLen]byte
	b[0] = list
	binary.BigEndian.PutUint32(b[1:5], uint32(offset))
	copy(b[5:], c.mac(b[:5]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (c *cursorCodec) decode(list byte, s string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 5+cursorMACLen || b[0] != list {
		return 0, errBadCursor
	}
	if !hmac.Equal(b[5:], c.mac(b[:5])) {
		return 0, errBadCursor
	}
	return int(binary.BigEndian.Uint32(b[1:5])), nil
}

func (c *cursorCodec) mac(b []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(b)
	return m.Sum(nil)[:cursorMACLen]
}
