//go:build race

package engine

// raceEnabled: the race detector slows every memory access several times,
// so tests that measure work take fewer or shorter cases.
const raceEnabled = true
