//go:build race

package search

// raceEnabled: the race detector is on; sync.Pool then drops pooled scratch at random,
// so allocation counts do not hold.
const raceEnabled = true
