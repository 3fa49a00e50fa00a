package cluster

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestSessionIDsOfEarlierVersions: session ids sealed by the code before it sealed
// through internal/seal (testdata/session-ids-v1.json), with the key and with a previous
// one, still open: clients holding them during a rolling upgrade keep their sessions.
func TestSessionIDsOfEarlierVersions(t *testing.T) {
	b, err := os.ReadFile("testdata/session-ids-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Key, Previous, Desc string
		ID                  string
		IDByPrevious        string `json:"id_by_previous"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	s, err := NewSealer(v.Key, v.Previous)
	if err != nil {
		t.Fatal(err)
	}
	for id, owner := range map[string]string{v.ID: "0a1b2c3d", v.IDByPrevious: "9f8e7d6c"} {
		got, desc, err := s.Open(id)
		if err != nil || got != owner || string(desc) != v.Desc {
			t.Errorf("Open(%s) = %q %q %v", id, got, desc, err)
		}
	}
	// The owner is bound: the same sealed bytes under another owner do not open.
	moved := "0a1b2c3e" + v.ID[strings.Index(v.ID, "-"):]
	if _, _, err := s.Open(moved); !errors.Is(err, ErrNotSealed) {
		t.Errorf("an id moved to another owner opened: %v", err)
	}
	// A sealer without the id's key does not open it.
	other, _ := NewSealer(v.Previous)
	if _, _, err := other.Open(v.ID); !errors.Is(err, ErrNotSealed) {
		t.Errorf("an id opened without its key: %v", err)
	}
}
