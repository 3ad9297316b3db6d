package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Without a display the app explains what to do instead of GTK's panic.
func TestGUIWithoutDisplay(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DISPLAY=") && !strings.HasPrefix(kv, "WAYLAND_DISPLAY=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, suzuranMainEnv+"=1", "XDG_STATE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		t.Fatalf("suzuran without a display: %v, want exit status 1\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "suzuran: no display") || !strings.Contains(string(out), "make run") {
		t.Errorf("suzuran without a display printed %q, want the no-display error that names make run", out)
	}
}
