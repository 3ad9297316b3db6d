//go:build race

package server

// raceEnabled: the race detector's shadow memory multiplies a process's
// resident size, so bounds on it hold only without it.
const raceEnabled = true
