package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var (
	keyA = strings.Repeat("a", 32)
	keyB = strings.Repeat("b", 32)
)

func mustNew(t testing.TB, label, key string, previous ...string) *Keyring {
	t.Helper()
	k, err := New(label, key, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSealOpen: a value opens with the additional data it was sealed with, and with
// nothing else: not with other data, another key, another label, nor once a bit of it
// changed or it was cut short.
func TestSealOpen(t *testing.T) {
	k := mustNew(t, "test", keyA)
	plain, ad := []byte("a grant"), []byte("grant\x00gh\x00api_key:alice")
	sealed := k.Seal(plain, ad)
	if len(sealed) != len(plain)+Overhead {
		t.Errorf("sealed %d bytes into %d, want %d", len(plain), len(sealed), len(plain)+Overhead)
	}
	if got, err := k.Open(sealed, ad); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if again := k.Seal(plain, ad); bytes.Equal(again, sealed) {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
	if got, err := k.Open(k.Seal(nil, nil), nil); err != nil || len(got) != 0 {
		t.Errorf("an empty value: %q %v", got, err)
	}
	refused := map[string][]byte{"other data": nil, "short": sealed[:Overhead-1], "empty": {}}
	for i := range sealed {
		b := bytes.Clone(sealed)
		b[i] ^= 0x40
		refused["bit flipped at "+string(rune('0'+i%10))] = b
	}
	for name, b := range refused {
		a := ad
		if name == "other data" {
			b, a = sealed, []byte("grant\x00gh\x00jwt:alice")
		}
		if got, err := k.Open(b, a); !errors.Is(err, ErrNotSealed) || got != nil {
			t.Errorf("%s: Open = %q, %v", name, got, err)
		}
	}
	if _, err := mustNew(t, "test", keyB).Open(sealed, ad); !errors.Is(err, ErrNotSealed) {
		t.Errorf("another key opened it: %v", err)
	}
	if _, err := mustNew(t, "another use", keyA).Open(sealed, ad); !errors.Is(err, ErrNotSealed) {
		t.Errorf("the same secret under another label opened it: %v", err)
	}
}

// TestRotation: a keyring seals with its first key and opens what its previous keys
// sealed; dropping a key stops its values from opening.
func TestRotation(t *testing.T) {
	old := mustNew(t, "test", keyA)
	sealedOld := old.Seal([]byte("v1"), nil)
	rotated := mustNew(t, "test", keyB, keyA)
	if got, err := rotated.Open(sealedOld, nil); err != nil || string(got) != "v1" {
		t.Fatalf("a value of the previous key: %q %v", got, err)
	}
	sealedNew := rotated.Seal([]byte("v2"), nil)
	if sealedNew[0] == sealedOld[0] {
		t.Fatalf("both keys have id %#x (the test's keys must not collide)", sealedNew[0])
	}
	if _, err := old.Open(sealedNew, nil); !errors.Is(err, ErrNotSealed) {
		t.Errorf("the old keyring opened a value of the new key: %v", err)
	}
	if _, err := mustNew(t, "test", keyB).Open(sealedOld, nil); !errors.Is(err, ErrNotSealed) {
		t.Errorf("a dropped key's value opened: %v", err)
	}
	same := mustNew(t, "test", keyA, keyA)
	if got, err := same.Open(sealedOld, nil); err != nil || string(got) != "v1" {
		t.Errorf("a key given twice: %q %v", got, err)
	}
	for _, keys := range [][]string{{""}, {keyA, ""}} {
		if _, err := New("test", keys[0], keys[1:]...); err == nil {
			t.Errorf("New(%q) accepted an empty key", keys)
		}
	}
}

// FuzzOpen: Open never panics, and opens nothing but what the keyring sealed with that
// additional data.
func FuzzOpen(f *testing.F) {
	k := mustNew(f, "fuzz", keyA, keyB)
	sealed := k.Seal([]byte("a value"), []byte("ad"))
	f.Add(sealed, []byte("ad"))
	f.Add(sealed[:Overhead], []byte("ad"))
	f.Add([]byte{sealed[0]}, []byte(nil))
	f.Add([]byte{}, []byte("ad"))
	f.Fuzz(func(t *testing.T, in, ad []byte) {
		got, err := k.Open(in, ad)
		if err != nil {
			if !errors.Is(err, ErrNotSealed) || got != nil {
				t.Fatalf("Open(%x) = %q, %v", in, got, err)
			}
			return
		}
		// The keys are derived, the nonce is random: a worker process of the fuzzer seals
		// its own seed. What opens is what some run of the test sealed.
		if string(ad) != "ad" || string(got) != "a value" {
			t.Fatalf("Open(%x, %q) opened %q: not sealed by the test", in, ad, got)
		}
	})
}

// FuzzSealOpen: whatever is sealed, with whatever additional data, opens as it was, and
// only with that data.
func FuzzSealOpen(f *testing.F) {
	k := mustNew(f, "fuzz", keyA)
	f.Add([]byte("a grant"), []byte("grant\x00gh\x00api_key:alice"))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, plain, ad []byte) {
		sealed := k.Seal(plain, ad)
		got, err := k.Open(sealed, ad)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Open(Seal(%q, %q)) = %q, %v", plain, ad, got, err)
		}
		if _, err := k.Open(sealed, append(bytes.Clone(ad), 0)); !errors.Is(err, ErrNotSealed) {
			t.Fatalf("opened with other additional data: %v", err)
		}
	})
}
