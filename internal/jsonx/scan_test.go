package jsonx

import (
	"encoding/json"
	"testing"
)

// FuzzScanValue checks the validating scanner against encoding/json: a whole input is
// valid JSON for one exactly when it is for the other.
func FuzzScanValue(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`, `-0.5e+10`, `"x`, `{"a":}`,
		`[1,]`, `01`, `1.`, `"\x01"`, `tru`, `{"a" 1}`, `  true  `, `"\ud800"`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, err := ScanValue(b, 0)
		ours := err == nil && SkipWS(b, end) == len(b)
		if theirs := json.Valid(b); ours != theirs {
			t.Fatalf("ScanValue says valid=%v, encoding/json says %v, for %q", ours, theirs, b)
		}
	})
}

func TestScanValueDepth(t *testing.T) {
	deep := make([]byte, 0, 2*maxDepth+10)
	for i := 0; i < maxDepth+5; i++ {
		deep = append(deep, '[')
	}
	if _, err := ScanValue(deep, 0); err == nil {
		t.Fatal("unbounded nesting accepted")
	}
}
