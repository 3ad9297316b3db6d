package main

import (
	"errors"
	"os"
)

// checkDisplay fails early, with what to do, where GTK would otherwise
// panic: a Linux server has no X11 or Wayland display.
func checkDisplay() error {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return errors.New("no display (DISPLAY and WAYLAND_DISPLAY are unset): the desktop app needs an X11 or Wayland session; " +
			"on a machine without one, `make run` starts it under Xvfb, and the subcommands (suzuran --help) need no display")
	}
	return nil
}
