//go:build !linux

package main

// macOS always has the menu bar.
func trayHostMissing() (bool, error) { return false, nil }

const trayHostHelp = ""
