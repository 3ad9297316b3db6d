//go:build smoke && linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDesktopWithoutTrayHost runs the app on a desktop that shows no tray
// icons (a session bus without a StatusNotifier watcher, as GNOME without
// the AppIndicator extension): the window opens, a dialog over it says once
// that the icon is unavailable and how to get it, and closing the window
// quits the app, since it would otherwise be unreachable. A second launch
// does not say it again.
func TestDesktopWithoutTrayHost(t *testing.T) {
	if *smokeBinary == "" {
		t.Fatal("-suzuran is required: the path of the built app (run through build/smoke.sh)")
	}
	if missing, err := trayHostMissing(); err != nil || !missing {
		t.Fatalf("this test needs a session bus without a tray host: missing %v, %v", missing, err)
	}
	stateDir := t.TempDir()
	home := t.TempDir() // the app's settings, database and demo model
	for launch := 1; launch <= 2; launch++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var output bytes.Buffer
		app := exec.CommandContext(ctx, *smokeBinary, "--log-level", "debug")
		app.Env = append(os.Environ(), "XDG_STATE_HOME="+stateDir, "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
			"XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
		app.Stdout, app.Stderr = &output, &output
		if err := app.Start(); err != nil {
			cancel()
			t.Fatalf("starting %s: %v", *smokeBinary, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- app.Wait() }()
		fail := func(format string, args ...any) {
			t.Helper()
			_ = app.Process.Kill()
			log, _ := os.ReadFile(filepath.Join(stateDir, "suzuran", "suzuran.log"))
			t.Fatalf("launch %d: "+format+"\napp output:\n%s\nlog:\n%s", append(append([]any{launch}, args...), output.String(), log)...)
		}

		window := waitForWindow(t, exited)
		marker := filepath.Join(stateDir, "suzuran", trayNoticeMarker)
		if launch == 1 {
			dialog := waitForTitle(t, exited, "^"+trayNoticeTitle+"$")
			t.Logf("launch 1: window %s, notice dialog %s", window.id, dialog)
			closeWindow(t, dialog)
			waitFor(t, exited, "the notice to be remembered", func() bool {
				_, err := os.Stat(marker)
				return err == nil
			})
		} else {
			// The page loads, the log says the notice was shown before,
			// and no dialog appears.
			waitFor(t, exited, "the log to say the notice is not shown again", func() bool {
				log, _ := os.ReadFile(filepath.Join(stateDir, "suzuran", "suzuran.log"))
				return bytes.Contains(log, []byte("notice was shown before"))
			})
			if out, _ := exec.Command("xdotool", "search", "--onlyvisible", "--name", "^"+trayNoticeTitle+"$").Output(); len(strings.Fields(string(out))) > 0 {
				fail("the notice dialog appeared again")
			}
		}

		// Closing the window quits: there is no tray icon to come back by.
		closeWindow(t, window.id)
		select {
		case err := <-exited:
			if err != nil {
				fail("closing the window ended the app with %v, want status 0", err)
			}
		case <-time.After(20 * time.Second):
			fail("the app still runs 20 s after its window was closed, with no tray icon to reach it")
		}
		cancel()
		log, _ := os.ReadFile(filepath.Join(stateDir, "suzuran", "suzuran.log"))
		if !bytes.Contains(log, []byte("no StatusNotifier host on this desktop")) {
			t.Errorf("launch %d: the log does not record the missing tray host:\n%s", launch, log)
		}
	}
}

// waitForTitle waits for a visible window whose title matches the regular
// expression and returns its id.
func waitForTitle(t *testing.T, exited <-chan error, title string) string {
	t.Helper()
	var id string
	waitFor(t, exited, "a window titled "+title, func() bool {
		out, _ := exec.Command("xdotool", "search", "--onlyvisible", "--name", title).Output()
		ids := strings.Fields(string(out))
		if len(ids) > 0 {
			id = ids[0]
		}
		return id != ""
	})
	return id
}
