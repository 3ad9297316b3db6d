package main

import (
	"fmt"
	"slices"
	"testing"
)

func TestNearMenuBar(t *testing.T) {
	// A 14-inch MacBook Pro at its default 1512×982 points, less a
	// 33-point menu bar and a 49-point Dock: the visible frame starts 49
	// points up. A 2560×1440 display to its right, its top 200 points
	// above the laptop's, with its own 25-point menu bar and no Dock; and
	// one to the left, below.
	laptop := nsRect{0, 49, 1512, 900}
	right := nsRect{1512, -258, 2560, 1415}
	left := nsRect{-1920, -300, 1920, 1055}
	for _, tc := range []struct {
		name    string
		visible nsRect
		w, h    float64
		want    nsRect
	}{
		// The app's 880×680 window: top right, 8 points in.
		{"laptop", laptop, 880, 680, nsRect{1512 - 880 - 8, 49 + 900 - 8 - 680, 880, 680}},
		// On the second display the frame is in that display's place of
		// the global space.
		{"display to the right", right, 880, 680, nsRect{1512 + 2560 - 880 - 8, -258 + 1415 - 8 - 680, 880, 680}},
		{"display to the left", left, 880, 680, nsRect{-1920 + 1920 - 880 - 8, -300 + 1055 - 8 - 680, 880, 680}},
		// The smallest window on a small screen still fits.
		{"small screen", nsRect{0, 0, 1024, 700}, 420, 360, nsRect{1024 - 420 - 8, 700 - 8 - 360, 420, 360}},
		// Wider than the screen: the left edge stays on it.
		{"too wide", nsRect{0, 0, 800, 900}, 880, 680, nsRect{0, 900 - 8 - 680, 880, 680}},
		{"too wide, second display", right, 3000, 680, nsRect{1512, -258 + 1415 - 8 - 680, 3000, 680}},
		// Taller than the room under the menu bar: the top edge stays under it.
		{"too tall", nsRect{0, 49, 1512, 680}, 880, 680, nsRect{1512 - 880 - 8, 49, 880, 680}},
	} {
		if got := nearMenuBar(tc.visible, tc.w, tc.h); got != tc.want {
			t.Errorf("%s: nearMenuBar(%v, %v, %v) = %v, want %v", tc.name, tc.visible, tc.w, tc.h, got, tc.want)
		}
	}
}

// fakeAppKit records what presentWindow asks of AppKit.
type fakeAppKit struct {
	screen    nsRect
	frame     nsRect
	hasScreen bool
	canActive bool
	calls     []string
}

func (f *fakeAppKit) setAccessoryPolicy() { f.calls = append(f.calls, "policy") }
func (f *fakeAppKit) windowScreen() (nsRect, bool) {
	f.calls = append(f.calls, "screen")
	return f.screen, f.hasScreen
}
func (f *fakeAppKit) windowFrame() nsRect { return f.frame }
func (f *fakeAppKit) setWindowFrame(r nsRect) {
	f.frame = r
	f.calls = append(f.calls, fmt.Sprintf("frame %v", r))
}
func (f *fakeAppKit) orderFront()              { f.calls = append(f.calls, "front") }
func (f *fakeAppKit) respondsToActivate() bool { return f.canActive }
func (f *fakeAppKit) activate()                { f.calls = append(f.calls, "activate") }
func (f *fakeAppKit) activateIgnoringOtherApps() {
	f.calls = append(f.calls, "activateIgnoringOtherApps")
}

// TestPresentWindow checks the order of presentWindow's AppKit calls: the
// activation policy before the window is shown (switching it after
// deactivates the app and sends the window behind), the frame placed on
// the window's own screen, then the window to the front, then activation
// with -activate where NSApp has it (macOS 14) and
// activateIgnoringOtherApps: before.
func TestPresentWindow(t *testing.T) {
	second := nsRect{1512, -258, 2560, 1415}
	placed := nearMenuBar(second, 880, 680)
	for _, tc := range []struct {
		name      string
		app       fakeAppKit
		wantCalls []string
	}{
		{"macOS 14", fakeAppKit{screen: second, hasScreen: true, canActive: true, frame: nsRect{100, 100, 880, 680}},
			[]string{"policy", "screen", fmt.Sprintf("frame %v", placed), "front", "activate"}},
		{"macOS 13", fakeAppKit{screen: second, hasScreen: true, frame: nsRect{100, 100, 880, 680}},
			[]string{"policy", "screen", fmt.Sprintf("frame %v", placed), "front", "activateIgnoringOtherApps"}},
		// No screen known: the window is shown where it is.
		{"no screen", fakeAppKit{canActive: true, frame: nsRect{100, 100, 880, 680}},
			[]string{"policy", "screen", "front", "activate"}},
	} {
		app := tc.app
		presentWindow(&app)
		if !slices.Equal(app.calls, tc.wantCalls) {
			t.Errorf("%s: AppKit calls %q, want %q", tc.name, app.calls, tc.wantCalls)
		}
	}
}
