//go:build !darwin

package main

// newGlobalShortcut answers nil: global shortcuts are macOS's (the settings
// view says so).
func newGlobalShortcut(open func()) func(string) error { return nil }

// startHidden is false: the window opens at launch, where the desktop
// puts it (near the menu bar is a macOS convention).
const startHidden = false

// showAppWindow leaves showing the window to Wails: window managers raise
// a window that is shown.
func showAppWindow() bool { return false }
