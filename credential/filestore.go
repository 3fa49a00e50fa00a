package credential

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FileStore keeps the grants in memory and in one encrypted file, for a proxy on one
// node: the grants survive a restart, and the file is useless without the key. The
// file is JSON, {"version":1,"grants":[…]}, each grant sealed (AES-256-GCM, see Sealer)
// and bound to its upstream and principal; it is written whole, through a temporary
// file renamed over it, readable by its owner only, after every change. The flows in
// progress and the leases stay in memory (they live minutes).
type FileStore struct {
	*MemoryStore // grants (the cache of the file), flows and leases

	path   string
	sealer *Sealer

	wmu sync.Mutex // serialises writes of the file
}

type fileImage struct {
	Version int      `json:"version"`
	Grants  [][]byte `json:"grants"`
}

// maxTokenFile bounds the file read at start.
const maxTokenFile = 64 << 20

// OpenFileStore reads the file at path (none is an empty store) with sealer's keys. A
// file it cannot open (another key, tampered with) is an error: the proxy does not
// start rather than drop every grant.
func OpenFileStore(path string, sealer *Sealer) (*FileStore, error) {
	s := &FileStore{MemoryStore: NewMemoryStore(), path: path, sealer: sealer}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the token file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the token file: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("the token file %s may be read or written by others than its owner (mode %04o): refusing it; chmod 600 it", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil || len(b) > maxTokenFile {
		return nil, fmt.Errorf("reading the token file %s: too large or unreadable", path)
	}
	var img fileImage
	if err := json.Unmarshal(b, &img); err != nil || img.Version != 1 {
		return nil, fmt.Errorf("the token file %s is not one mcp-proxy wrote", path)
	}
	for _, sealed := range img.Grants {
		// Each entry names its upstream and principal before its seal, which is bound
		// to them: a renamed entry does not open.
		up, p, blob, ok := splitNamed(sealed)
		if !ok {
			return nil, fmt.Errorf("the token file %s is not one mcp-proxy wrote", path)
		}
		g, err := sealer.OpenGrant(blob, up, p)
		if err != nil {
			return nil, fmt.Errorf("the token file %s cannot be opened with the token store's key (written with another key?): %w", path, err)
		}
		s.grants[grantKey{up, p}] = g
	}
	return s, nil
}

// named prefixes a sealed grant with its upstream and principal (the additional data
// it is bound to), NUL-separated: names cannot hold NUL.
func named(up, p string, blob []byte) []byte {
	out := make([]byte, 0, len(up)+len(p)+2+len(blob))
	out = append(out, up...)
	out = append(out, 0)
	out = append(out, p...)
	out = append(out, 0)
	return append(out, blob...)
}

func splitNamed(b []byte) (up, p string, blob []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", "", nil, false
	}
	j := bytes.IndexByte(b[i+1:], 0)
	if j < 0 {
		return "", "", nil, false
	}
	return string(b[:i]), string(b[i+1 : i+1+j]), b[i+2+j:], true
}

var _ Store = (*FileStore)(nil)

// Put implements Store: the grant is kept, and the file written.
func (s *FileStore) Put(ctx context.Context, g *Grant) error {
	if err := s.MemoryStore.Put(ctx, g); err != nil {
		return err
	}
	return s.write()
}

// Delete implements Store.
func (s *FileStore) Delete(ctx context.Context, up, p string) error {
	if err := s.MemoryStore.Delete(ctx, up, p); err != nil {
		return err
	}
	return s.write()
}

// write seals every grant and writes the file (0600, atomically). Expired grants that
// cannot be refreshed are left out.
func (s *FileStore) write() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	now := time.Now()
	s.mu.Lock()
	img := fileImage{Version: 1, Grants: make([][]byte, 0, len(s.grants))}
	for k, g := range s.grants {
		if end := g.Ends(); !end.IsZero() && end.Before(now) && g.RefreshToken.IsZero() && len(g.Secrets) == 0 {
			continue
		}
		blob, err := s.sealer.SealGrant(g)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		img.Grants = append(img.Grants, named(k.upstream, k.principal, blob))
	}
	s.mu.Unlock()
	b, err := json.Marshal(img)
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, ".tokens-*")
	if err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the token file: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the token file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the token file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	return nil
}
