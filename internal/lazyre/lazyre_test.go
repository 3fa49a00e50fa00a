package lazyre

import (
	"slices"
	"sync"
	"testing"
)

func TestRegexp(t *testing.T) {
	re := New(`^([a-z]+)=(\d+)$`)
	if re.re != nil {
		t.Fatal("compiled before first use")
	}
	var wg sync.WaitGroup
	for range 8 { // first use from several goroutines at once (run with -race)
		wg.Go(func() {
			if !re.MatchString("ab=12") || re.MatchString("ab=x") {
				t.Error("MatchString")
			}
		})
	}
	wg.Wait()
	if got := re.FindStringSubmatch("x=7"); !slices.Equal(got, []string{"x=7", "x", "7"}) {
		t.Errorf("FindStringSubmatch = %q", got)
	}
	if got := New(`\{[^{}]*\}`).FindAllStringIndex("a{b}c{d}", -1); len(got) != 2 || got[1][0] != 5 {
		t.Errorf("FindAllStringIndex = %v", got)
	}
	if re.String() != `^([a-z]+)=(\d+)$` || re.Compiled() != re.Compiled() {
		t.Error("String or Compiled")
	}
}

func TestBadPatternPanicsOnFirstUse(t *testing.T) {
	re := New(`(`) // no panic here
	defer func() {
		if recover() == nil {
			t.Error("a bad pattern did not panic on first use")
		}
	}()
	re.MatchString("x")
}
