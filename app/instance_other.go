//go:build !linux

package main

// On macOS, Wails' SingleInstanceLock (gui.go) hands a second launch over
// to the first.
func claimInstance(show func()) (first bool, release func(), err error) {
	return true, func() {}, nil
}
