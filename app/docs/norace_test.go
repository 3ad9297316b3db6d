//go:build !race

package docs

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
