package main

// windowMargin is the gap, in points, between the window and the menu bar
// and the screen's right edge when it opens near the menu bar.
const windowMargin = 8

// nsRect is AppKit's NSRect (CGFloat is 64 bits on every Mac Suzuran runs
// on): points in the global screen space, whose origin is the bottom left
// of the primary display, y upwards. Another display's frame has its own
// origin in it, negative left of or below the primary.
type nsRect struct{ X, Y, Width, Height float64 }

// nearMenuBar is the frame a window of width×height opens in on macOS: at
// the top right of visible, the visible frame of the screen it opens on
// (the area below the menu bar and beside the Dock), under the menu-bar
// icons, as menu-bar apps open. A window wider or taller than the area
// keeps its left or top edge on screen.
func nearMenuBar(visible nsRect, width, height float64) nsRect {
	x := visible.X + visible.Width - width - windowMargin
	if x < visible.X {
		x = visible.X
	}
	top := visible.Y + visible.Height // the visible frame's top edge
	if height+windowMargin <= visible.Height {
		top -= windowMargin
	}
	return nsRect{X: x, Y: top - height, Width: width, Height: height}
}

// appKit is what showing the window asks of AppKit. On macOS
// (desktop_darwin.go) it is NSApp and Wails' window, called on the main
// thread.
type appKit interface {
	// setAccessoryPolicy makes the app a menu-bar app: no Dock icon.
	setAccessoryPolicy()
	// windowScreen is the visible frame of the screen the window is on —
	// the screen Wails positions it against — false when there is none.
	windowScreen() (nsRect, bool)
	windowFrame() nsRect
	setWindowFrame(nsRect)
	// orderFront deminiaturizes the window and makes it key and frontmost.
	orderFront()
	// respondsToActivate says whether NSApp has -activate (macOS 14 and
	// later), where activateIgnoringOtherApps: is deprecated and no longer
	// takes focus from the active app.
	respondsToActivate() bool
	activate()
	activateIgnoringOtherApps()
}

// presentWindow shows the window near the menu bar with focus, in the
// order AppKit needs, all in one main-thread block: the activation policy
// first, since switching it to accessory deactivates the app and sends its
// windows behind; then the frame, measured against the screen the window
// is on and set on that same screen; then the window to the front; then
// the app activated, so that the window takes focus from another app (the
// global shortcut).
func presentWindow(a appKit) {
	a.setAccessoryPolicy()
	if visible, ok := a.windowScreen(); ok && visible.Width > 0 && visible.Height > 0 {
		f := a.windowFrame()
		a.setWindowFrame(nearMenuBar(visible, f.Width, f.Height))
	}
	a.orderFront()
	if a.respondsToActivate() {
		a.activate()
	} else {
		a.activateIgnoringOtherApps()
	}
}
