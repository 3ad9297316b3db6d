//go:build darwin

package main

import (
	"sync"

	"github.com/ebitengine/purego/objc"

	"github.com/suzuran-app/suzuran/app/hotkey"
)

// onMainThreadSync runs job on the main thread and returns when it has
// run; on the main thread already, it runs it at once (queueing it there
// and waiting would never end).
func onMainThreadSync(job func()) {
	if objc.Send[bool](objc.ID(objc.GetClass("NSThread")), objc.RegisterName("isMainThread")) {
		job()
		return
	}
	done := make(chan struct{})
	onMainThread(func() {
		defer close(done)
		job()
	})
	<-done
}

// globalShortcut holds the one registered global shortcut and swaps it.
type globalShortcut struct {
	open func()

	mu      sync.Mutex
	name    string
	current *hotkey.Registration
}

// newGlobalShortcut is the service's Options.Shortcut on macOS: pressing
// the shortcut runs open.
func newGlobalShortcut(open func()) func(string) error {
	g := &globalShortcut{open: open}
	return g.set
}

// set takes the shortcut called name ("" for none). The new one is taken
// before the old one is given back, so a refused shortcut leaves the old
// one working.
func (g *globalShortcut) set(name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if name == g.name && (name == "" || g.current != nil) {
		return nil
	}
	var next *hotkey.Registration
	if name != "" {
		s, err := hotkey.Parse(name)
		if err != nil {
			return err
		}
		if next, err = hotkey.Register(s, g.open, onMainThreadSync); err != nil {
			return err
		}
	}
	if g.current != nil {
		g.current.Unregister()
	}
	g.current, g.name = next, name
	return nil
}

// startHidden keeps Wails from showing the window at launch, under the
// regular activation policy it sets (its AppDelegate orders the window
// front in applicationWillFinishLaunching); the first presentWindow shows
// it after the switch to the accessory policy.
const startHidden = true

// showAppWindow shows the window near the menu bar with focus, in one
// main-thread block (presentWindow). It returns false when Wails' window is
// not among NSApp's windows; the caller then shows it through Wails.
func showAppWindow() bool {
	found := false
	onMainThreadSync(func() {
		window := wailsWindow()
		if window == 0 {
			// Still a menu-bar app, whatever shows the window.
			nsApp().Send(sel("setActivationPolicy:"), nsApplicationActivationPolicyAccessory)
			return
		}
		found = true
		presentWindow(nsAppKit{app: nsApp(), window: window})
	})
	return found
}

// wailsWindow is Wails' main window (its class WailsWindow, an NSWindow),
// or 0. NSApp's windows include hidden ones; the menu-bar icon's window is
// of another class.
func wailsWindow() objc.ID {
	class := objc.GetClass("WailsWindow")
	if class == 0 {
		return 0
	}
	windows := nsApp().Send(sel("windows"))
	n := objc.Send[uint64](windows, sel("count"))
	for i := uint64(0); i < n; i++ {
		w := windows.Send(sel("objectAtIndex:"), i)
		if objc.Send[bool](w, sel("isKindOfClass:"), class) {
			return w
		}
	}
	return 0
}

// nsAppKit is appKit over NSApp and one NSWindow; its methods must run on
// the main thread.
type nsAppKit struct{ app, window objc.ID }

func (a nsAppKit) setAccessoryPolicy() {
	a.app.Send(sel("setActivationPolicy:"), nsApplicationActivationPolicyAccessory)
}

// windowScreen measures the screen Wails positions against
// (WailsContext.getCurrentScreen): the window's own, else the main screen.
func (a nsAppKit) windowScreen() (nsRect, bool) {
	screen := a.window.Send(sel("screen"))
	if screen == 0 {
		screen = objc.ID(objc.GetClass("NSScreen")).Send(sel("mainScreen"))
	}
	if screen == 0 {
		return nsRect{}, false
	}
	return objc.Send[nsRect](screen, sel("visibleFrame")), true
}

func (a nsAppKit) windowFrame() nsRect { return objc.Send[nsRect](a.window, sel("frame")) }

func (a nsAppKit) setWindowFrame(r nsRect) {
	a.window.Send(sel("setFrame:display:"), r, true)
}

func (a nsAppKit) orderFront() {
	if objc.Send[bool](a.window, sel("isMiniaturized")) {
		a.window.Send(sel("deminiaturize:"), objc.ID(0))
	}
	a.window.Send(sel("makeKeyAndOrderFront:"), objc.ID(0))
}

func (a nsAppKit) respondsToActivate() bool {
	return objc.Send[bool](a.app, sel("respondsToSelector:"), sel("activate"))
}

func (a nsAppKit) activate() { a.app.Send(sel("activate")) }

func (a nsAppKit) activateIgnoringOtherApps() {
	a.app.Send(sel("activateIgnoringOtherApps:"), true)
}

func sel(name string) objc.SEL { return objc.RegisterName(name) }
