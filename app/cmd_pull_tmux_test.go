//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/app/internal/fakehub"
)

// TestPullProgressBarInTmux runs `suzuran pull` in a tmux terminal against
// the fake hub, slowed down so that the bar is seen mid-way: it is redrawn
// in place on one line with the bytes, the speed and the time left, and
// ends at 100%.
func TestPullProgressBarInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("this test needs tmux (make deps installs it)")
	}
	h := fakehub.New(t)
	h.AddDir(t, tinyRepo, tinyModel)
	// About 5 s for the 1.3 MB of weights.
	h.SetFault("model.safetensors", fakehub.Fault{BytesPerSecond: 250_000})
	home, _ := hubEnv(t, h)
	socket := filepath.Join(t.TempDir(), "tmux")
	exitFile := filepath.Join(home, "exit-code")
	script := fmt.Sprintf("%s=1 '%s' pull %s; echo $? > '%s'; sleep 600", suzuranMainEnv, os.Args[0], tinyRepo, exitFile)
	run := func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-S", socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("new-session", "-d", "-x", "100", "-y", "12", "sh", "-c", script)
	t.Cleanup(func() { exec.Command(tmux, "-S", socket, "kill-server").Run() })

	var midway, final string
	deadline := time.Now().Add(60 * time.Second)
	for {
		screen := run("capture-pane", "-p")
		if midway == "" && strings.Contains(screen, "[=") && !strings.Contains(screen, "100%") && strings.Contains(screen, "left") {
			midway = screen
		}
		if _, err := os.Stat(exitFile); err == nil {
			time.Sleep(100 * time.Millisecond)
			final = run("capture-pane", "-p")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("suzuran pull did not finish in 60 s; the terminal shows:\n%s", screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the terminal mid-way:\n%s", midway)
	t.Logf("the terminal at the end:\n%s", final)
	if code, _ := os.ReadFile(exitFile); strings.TrimSpace(string(code)) != "0" {
		t.Fatalf("suzuran pull exited with %s", code)
	}
	if midway == "" {
		t.Fatal("no capture showed the bar mid-way with the time left")
	}
	bar := lineWith(midway, "[=")
	if !strings.Contains(bar, "MB / 1.40 MB") || !strings.Contains(bar, "KB/s") || !strings.HasSuffix(bar, "left") {
		t.Errorf("mid-way bar %q: want bytes of 1.40 MB, a speed in KB/s and the time left", bar)
	}
	if n := strings.Count(final, "[="); n != 1 {
		t.Errorf("the bar appears on %d lines at the end, want 1 (it redraws in place)", n)
	}
	if end := lineWith(final, "[="); !strings.HasSuffix(end, "100% 1.40 MB / 1.40 MB") || !strings.Contains(end, strings.Repeat("=", 60)) {
		t.Errorf("final bar %q, want it full at 100%%", end)
	}
	if !strings.Contains(final, "is now the model Suzuran uses") {
		t.Error("the end of the pull is missing")
	}
}

// lineWith returns the first line of screen that contains s, trimmed.
func lineWith(screen, s string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
