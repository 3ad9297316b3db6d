package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Without a display the app explains what to do instead of GTK's panic.
// The same holds when launched with the process serial number macOS's
// Launch Services passes (-psn_0_N): the root command starts the desktop
// app rather than refusing the argument.
func TestGUIWithoutDisplay(t *testing.T) {
	for _, args := range [][]string{nil, {"-psn_0_4242"}} {
		cmd := exec.Command(os.Args[0], args...)
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "DISPLAY=") && !strings.HasPrefix(kv, "WAYLAND_DISPLAY=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, suzuranMainEnv+"=1", "XDG_STATE_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
			t.Fatalf("suzuran %q without a display: %v, want exit status 1\n%s", args, err, out)
		}
		if !strings.HasPrefix(string(out), "suzuran: no display") || !strings.Contains(string(out), "make run") {
			t.Errorf("suzuran %q without a display printed %q, want the no-display error that names make run", args, out)
		}
	}
}
