//go:build !darwin

package main

import (
	"fyne.io/systray"

	"github.com/suzuran-app/suzuran/assets"
)

// On Linux the tray talks D-Bus from any goroutine: no main-thread rule.
func startTray(nativeUp func()) { nativeUp() }

// stopTray unregisters the StatusNotifierItem and closes its D-Bus
// connection, so the panel drops the icon at once.
func stopTray(nativeDown func()) { nativeDown() }

func setTrayIcon() {
	systray.SetIcon(assets.TrayColor)
	// The SNI Title is what panels show in lists of tray items.
	systray.SetTitle("Suzuran")
}

// A left click on a StatusNotifierItem ("Activate") opens the window; the
// menu is on the right click, as panels expect.
func setTrayClick(open func()) { systray.SetOnTapped(open) }
