//go:build !darwin

package main

import "context"

// newGlobalShortcut answers nil: global shortcuts are macOS's (the settings
// view says so).
func newGlobalShortcut(open func()) func(string) error { return nil }

// placeWindow leaves the window where the desktop put it: near the menu
// bar is a macOS convention.
func placeWindow(ctx context.Context) {}
