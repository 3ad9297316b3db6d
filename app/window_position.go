package main

// windowMargin is the gap, in points, between the window and the menu bar
// and the screen's right edge when it opens near the menu bar.
const windowMargin = 8

// nearMenuBar is where a window of width×height opens on macOS: at the top
// right of the screen's visible frame (the area below the menu bar and
// beside the Dock), under the menu-bar icons, as menu-bar apps open. The
// position is from the visible frame's top left, which is what Wails'
// WindowSetPosition takes on macOS. A window wider or taller than the area
// keeps its left or top edge on screen.
func nearMenuBar(visibleWidth, visibleHeight, width, height int) (x, y int) {
	x = visibleWidth - width - windowMargin
	if x < 0 {
		x = 0
	}
	y = windowMargin
	if y+height > visibleHeight {
		y = 0
	}
	return x, y
}
