package main

import (
	"sync"

	"fyne.io/systray"
	"github.com/rs/zerolog"
)

// Tray menu item titles; the desktop smoke test looks for these.
const (
	trayOpenTitle = "Open Suzuran"
	trayQuitTitle = "Quit"
)

// trayActions is what the tray menu does.
type trayActions struct {
	open func() // show the chat window
	quit func() // quit the app
}

// tray is the menu-bar icon (macOS) or StatusNotifierItem (Linux) and its
// menu. It runs inside the Wails app's event loop (systray's external-loop
// mode): start creates it once Wails is up, stop takes it down.
type tray struct {
	log        zerolog.Logger
	actions    trayActions
	nativeUp   func()
	nativeDown func()
	stopOnce   sync.Once
}

func newTray(actions trayActions, log zerolog.Logger) *tray {
	t := &tray{log: log, actions: actions}
	t.nativeUp, t.nativeDown = systray.RunWithExternalLoop(t.ready, nil)
	return t
}

// start shows the tray; on macOS it must run on the main thread, which
// startTray (tray_darwin.go) arranges.
func (t *tray) start() { startTray(t.nativeUp) }

// stop removes the tray at shutdown.
func (t *tray) stop() { t.stopOnce.Do(func() { stopTray(t.nativeDown) }) }

// ready builds the icon and menu; systray calls it once the tray exists.
func (t *tray) ready() {
	setTrayIcon()
	systray.SetTooltip("Suzuran")
	open := systray.AddMenuItem(trayOpenTitle, "Show the chat window")
	systray.AddSeparator()
	quit := systray.AddMenuItem(trayQuitTitle, "Quit Suzuran")
	setTrayClick(t.actions.open)
	t.log.Debug().Msg("tray ready")

	go func() {
		for {
			select {
			case <-open.ClickedCh:
				t.actions.open()
			case <-quit.ClickedCh:
				t.actions.quit()
				return
			}
		}
	}()
}
