//go:build darwin

package main

import (
	"context"
	"sync"

	"github.com/ebitengine/purego/objc"
	wailsruntime "github.com/wailsapp/wails/v2/pkg/runtime"

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

// nsRect is AppKit's NSRect (CGFloat is 64 bits on every Mac Suzuran runs
// on).
type nsRect struct{ X, Y, Width, Height float64 }

// placeWindow moves the window near the menu bar: the top right of the
// visible frame of the screen that holds the menu bar (the first of
// NSScreen's screens). Wails positions from the visible frame of the
// screen the window is on, which is that one unless the user moved the
// window to another display; there the same corner is used.
func placeWindow(ctx context.Context) {
	var visible nsRect
	onMainThreadSync(func() {
		screens := objc.ID(objc.GetClass("NSScreen")).Send(objc.RegisterName("screens"))
		if objc.Send[uint64](screens, objc.RegisterName("count")) == 0 {
			return
		}
		first := screens.Send(objc.RegisterName("objectAtIndex:"), uint64(0))
		visible = objc.Send[nsRect](first, objc.RegisterName("visibleFrame"))
	})
	if visible.Width <= 0 || visible.Height <= 0 {
		return
	}
	width, height := wailsruntime.WindowGetSize(ctx)
	x, y := nearMenuBar(int(visible.Width), int(visible.Height), width, height)
	wailsruntime.WindowSetPosition(ctx, x, y)
}
