package main

import (
	"fmt"

	"github.com/godbus/dbus/v5"
)

// StatusNotifier names: a panel that shows tray icons (GNOME with the
// AppIndicator extension, KDE Plasma, XFCE, waybar …) owns the watcher on
// the session bus and registers itself with it as a host.
const (
	snWatcherName = "org.kde.StatusNotifierWatcher"
	snWatcherPath = "/StatusNotifierWatcher"
)

// trayHostMissing reports whether this desktop has no StatusNotifier host,
// so that the tray icon would appear nowhere: no watcher on the session bus,
// or a watcher that says no host has registered. An error means the session
// bus could not be asked (then nothing is known).
func trayHostMissing() (bool, error) {
	conn, err := dbus.SessionBusPrivate()
	if err != nil {
		return false, fmt.Errorf("session bus: %w", err)
	}
	defer conn.Close()
	if err := conn.Auth(nil); err != nil {
		return false, fmt.Errorf("session bus authentication: %w", err)
	}
	if err := conn.Hello(); err != nil {
		return false, fmt.Errorf("session bus hello: %w", err)
	}
	var owned bool
	if err := conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, snWatcherName).Store(&owned); err != nil {
		return false, fmt.Errorf("asking for %s: %w", snWatcherName, err)
	}
	if !owned {
		return true, nil
	}
	v, err := conn.Object(snWatcherName, snWatcherPath).GetProperty(snWatcherName + ".IsStatusNotifierHostRegistered")
	if err != nil {
		// A watcher without the property is an old one; its panel shows
		// icons.
		return false, nil
	}
	registered, _ := v.Value().(bool)
	return !registered, nil
}

// trayHostHelp is what the window says, once, when the desktop shows no
// tray icons.
const trayHostHelp = "This desktop shows no menu-bar (tray) icons, so Suzuran's icon is not visible. " +
	"Use this window instead; closing it quits Suzuran.\n\n" +
	"To get the icon: on GNOME, install and enable the AppIndicator extension " +
	"(Debian and Ubuntu: sudo apt install gnome-shell-extension-appindicator, then log out and in); " +
	"KDE Plasma, XFCE, Cinnamon and MATE show it as they are."
