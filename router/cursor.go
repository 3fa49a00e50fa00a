package router

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// cursorCodec mints and checks the proxy's own pagination cursors. A cursor is opaque to
// clients and tamper-evident: it names the list and an offset into the merged list, under
// an HMAC with a key that lives only in this process.
type cursorCodec struct {
	key [32]byte
}

func newCursorCodec() *cursorCodec {
	c := &cursorCodec{}
	// Since Go 1.24 crypto/rand.Read never returns an error (it aborts the program
	// if the system's random source fails), so there is nothing to handle.
	_, _ = rand.Read(c.key[:])
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
	m := hmac.New(sha256.New, c.key[:])
	m.Write(b)
	return m.Sum(nil)[:cursorMACLen]
}
