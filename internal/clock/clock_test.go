package clock

import (
	"testing"
	"time"
)

func TestFakeRunsDueFunctionsInOrder(t *testing.T) {
	c := NewFake()
	var got []string
	c.AfterFunc(30*time.Millisecond, func() { got = append(got, "c") })
	a := c.AfterFunc(10*time.Millisecond, func() { got = append(got, "a") })
	b := c.AfterFunc(20*time.Millisecond, func() { got = append(got, "b") })
	if !b.Stop() || b.Stop() {
		t.Fatal("Stop reports whether it was pending")
	}
	a.Reset(25 * time.Millisecond) // now after c? no: 25 < 30
	c.Advance(15 * time.Millisecond)
	if len(got) != 0 || c.Pending() != 2 {
		t.Fatalf("at 15ms: ran %v, %d pending", got, c.Pending())
	}
	c.Advance(20 * time.Millisecond)
	if len(got) != 2 || got[0] != "a" || got[1] != "c" || c.Pending() != 0 {
		t.Fatalf("at 35ms: ran %v, %d pending", got, c.Pending())
	}
	if want := NewFake().Now().Add(35 * time.Millisecond); !c.Now().Equal(want) {
		t.Errorf("Now = %v, want %v", c.Now(), want)
	}
	if a.Reset(time.Millisecond) {
		t.Error("Reset of a timer that ran reports it pending")
	}
	c.Advance(time.Millisecond)
	if len(got) != 3 {
		t.Errorf("a reset timer runs again: %v", got)
	}
}

func TestOr(t *testing.T) {
	if _, ok := Or(nil).(Real); !ok {
		t.Error("Or(nil) is not the real clock")
	}
	f := NewFake()
	if Or(f) != Clock(f) {
		t.Error("Or(f) is not f")
	}
}
