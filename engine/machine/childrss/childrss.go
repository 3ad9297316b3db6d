// Package childrss is for tests that bound the memory of a piece of work:
// the test binary runs itself again as a child process that does only that
// work, so that the child's peak resident size (read by the child itself
// through engine/machine.PeakRSS, which on Linux is its own high-water
// mark, not the parent's carried across the exec) measures the work, the
// Go runtime included.
//
// The child calls Guard first, so that a failing run stops at a ceiling
// rather than take the machine's memory; the parent starts it with Run.
package childrss

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/machine"
)

// GuardExit is the exit status of a child that Guard stopped.
const GuardExit = 3

// Guard watches this process's peak resident size from a goroutine and
// stops the process, printing {"error": "..."} as its one line of output,
// once it passes ceiling bytes.
func Guard(ceiling int64) {
	go func() {
		for {
			if rss := machine.PeakRSS(); rss > ceiling {
				fmt.Printf(`{"error":"peak RSS passed %d MB: stopped"}`+"\n", rss>>20)
				os.Exit(GuardExit)
			}
			time.Sleep(5 * time.Millisecond) // the watchdog samples the RSS: how often is the bound's grain
		}
	}()
}

// Run runs the test binary bin with no tests (-test.run=^$) and env added
// to this process's environment, and returns what it printed on stdout.
// A child that fails, Guard's stop included, fails t with its output.
func Run(t testing.TB, bin string, env ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}
