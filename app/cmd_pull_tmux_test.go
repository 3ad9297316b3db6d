//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/app/internal/fakehub"
)

// TestPullProgressBarInTmux types `suzuran pull` into a shell in a tmux
// terminal, against the fake hub slowed down so that the bar is seen
// mid-way: it is redrawn in place on one line with the bytes, the speed and
// the time left. Ctrl-C stops it with a message saying how to go on; the
// same command again resumes (from the bytes already there, not from 0%)
// and ends at 100%.
func TestPullProgressBarInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("this test needs tmux (make deps installs it)")
	}
	h := fakehub.New(t)
	repo := h.AddDir(t, tinyRepo, tinyModel)
	const weights = "model.safetensors"
	// About 5 s for the 1.3 MB of weights.
	h.SetFault(weights, fakehub.Fault{BytesPerSecond: 250_000})
	home, _ := hubEnv(t, h)
	t.Setenv(suzuranMainEnv, "1")
	t.Setenv("PS1", "$ ")
	t.Setenv("HISTFILE", "") // bash saves no history into the test's home
	pane := startPane(t, tmux)
	tm := pane.run
	exitFile := filepath.Join(home, "exit-codes")
	pull := fmt.Sprintf("clear; '%s' pull %s; echo $? >> '%s'", os.Args[0], tinyRepo, exitFile)

	waitScreen := pane.waitScreen
	exits := func() []string {
		data, _ := os.ReadFile(exitFile)
		return strings.Fields(string(data))
	}
	at := barPercent

	tm("send-keys", pull, "Enter")
	midway := waitScreen("the bar between 20% and 80% with the time left", func(s string) bool {
		p := at(s)
		return p >= 20 && p <= 80 && strings.HasSuffix(lineWith(s, "[="), "left")
	})
	tm("send-keys", "C-c")
	waitScreen("the pull stopped", func(string) bool { return len(exits()) == 1 })
	stopped := tm("capture-pane", "-p")

	h.SetFault(weights, fakehub.Fault{BytesPerSecond: 500_000})
	tm("send-keys", pull, "Enter")
	resumed := waitScreen("the resumed bar", func(s string) bool { return !strings.Contains(s, "^C") && at(s) >= 0 })
	waitScreen("the end of the second pull", func(string) bool { return len(exits()) == 2 })
	final := tm("capture-pane", "-p")

	t.Logf("the terminal mid-way:\n%s", midway)
	t.Logf("after Ctrl-C:\n%s", stopped)
	t.Logf("the second pull, first bar seen:\n%s", resumed)
	t.Logf("the terminal at the end:\n%s", final)

	bar := lineWith(midway, "[=")
	if !strings.Contains(bar, " / 1.40 MB") || !strings.Contains(bar, "KB/s") {
		t.Errorf("mid-way bar %q: want bytes of 1.40 MB and a speed in KB/s", bar)
	}
	if e := exits(); e[0] != "1" || e[1] != "0" {
		t.Errorf("exit codes %v, want 1 (stopped) then 0", e)
	}
	if !strings.Contains(stopped, "stopped; run suzuran pull "+tinyRepo+" again to go on where it stopped") {
		t.Error("Ctrl-C did not say how to go on")
	}
	if p := at(resumed); p < at(midway) {
		t.Errorf("the second pull started its bar at %d%%, below the %d%% where the first stopped", p, at(midway))
	}
	if n := strings.Count(final, "[="); n != 1 {
		t.Errorf("the bar appears on %d lines at the end, want 1 (it redraws in place)", n)
	}
	if end := lineWith(final, "[="); !strings.HasSuffix(end, "100% 1.40 MB / 1.40 MB") || !strings.Contains(end, strings.Repeat("=", 60)) {
		t.Errorf("final bar %q, want it full at 100%%", end)
	}
	if strings.Contains(final, "downloaded 1.40 MB") || !strings.Contains(final, "MB to download") {
		t.Error("the second pull should download only what the first left")
	}
	if !strings.Contains(final, "is now the model Suzuran uses") {
		t.Error("the end of the pull is missing")
	}
	ranges := h.Ranges(weights)
	if len(ranges) != 2 || !strings.HasPrefix(ranges[1], "bytes=") || ranges[1] == "bytes=0-" {
		t.Errorf("Range headers for %s: %q, want the second pull to resume", weights, ranges)
	}
	for name := range repo.Files {
		if name != weights && h.Resolves(name) > 1 {
			t.Errorf("%s was requested %d times; the second pull should reuse it", name, h.Resolves(name))
		}
	}
}

// tmuxPane is a bash in a tmux terminal of 100 × 16 of the test's own.
type tmuxPane struct {
	t            *testing.T
	tmux, socket string
}

func startPane(t *testing.T, tmux string) *tmuxPane {
	p := &tmuxPane{t: t, tmux: tmux, socket: filepath.Join(t.TempDir(), "tmux")}
	p.run("new-session", "-d", "-x", "100", "-y", "16", "bash", "--norc", "--noprofile", "-i")
	t.Cleanup(func() { exec.Command(tmux, "-S", p.socket, "kill-server").Run() })
	return p
}

// run runs a tmux command on the pane's server and returns its output.
func (p *tmuxPane) run(args ...string) string {
	out, err := exec.Command(p.tmux, append([]string{"-S", p.socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitScreen captures the pane until ok accepts it.
func (p *tmuxPane) waitScreen(what string, ok func(screen string) bool) string {
	deadline := time.Now().Add(60 * time.Second)
	for {
		screen := p.run("capture-pane", "-p")
		if ok(screen) {
			return screen
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the terminal never showed %s; it shows:\n%s", what, screen)
		}
		time.Sleep(50 * time.Millisecond) // a terminal screen has no event: it is read again
	}
}

var barPercentRE = regexp.MustCompile(`\] +(\d+)% `)

// barPercent is the percentage the progress bar on screen shows, -1 for no bar.
func barPercent(screen string) int {
	m := barPercentRE.FindStringSubmatch(lineWith(screen, "[="))
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
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
