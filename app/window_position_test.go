package main

import "testing"

func TestNearMenuBar(t *testing.T) {
	for _, tc := range []struct {
		name                              string
		visibleWidth, visibleHeight, w, h int
		wantX, wantY                      int
	}{
		// A 14-inch MacBook Pro at its default 1512×982 points, less a
		// 33-point menu bar and a 49-point Dock, and the app's 880×680
		// window: top right, 8 points in.
		{"laptop", 1512, 900, 880, 680, 1512 - 880 - 8, 8},
		{"large display", 2560, 1367, 880, 680, 2560 - 880 - 8, 8},
		// The smallest window on a small screen still fits.
		{"small screen", 1024, 700, 420, 360, 1024 - 420 - 8, 8},
		// Wider than the screen: the left edge stays on it.
		{"too wide", 800, 900, 880, 680, 0, 8},
		// Taller than the room under the menu bar: the top edge stays under it.
		{"too tall", 1512, 680, 880, 680, 1512 - 880 - 8, 0},
	} {
		x, y := nearMenuBar(tc.visibleWidth, tc.visibleHeight, tc.w, tc.h)
		if x != tc.wantX || y != tc.wantY {
			t.Errorf("%s: nearMenuBar(%d, %d, %d, %d) = (%d, %d), want (%d, %d)",
				tc.name, tc.visibleWidth, tc.visibleHeight, tc.w, tc.h, x, y, tc.wantX, tc.wantY)
		}
	}
}
