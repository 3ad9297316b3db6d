//go:build !linux

package main

// checkDisplay has nothing to check on macOS, where the window server is
// always there for a logged-in user.
func checkDisplay() error { return nil }
