//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the test drives the master side as
// a user at a keyboard would, the command runs on the slave side.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("this test needs /dev/ptmx: %v", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// terminalOutput collects what the command writes to the terminal.
type terminalOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *terminalOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output after offset from contains s and returns
// the offset just past it.
func (o *terminalOutput) waitFor(t *testing.T, from int, s string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out := o.String()
		if i := strings.Index(out[from:], s); i >= 0 {
			return from + i + len(s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the terminal never showed %q; it shows:\n%q", s, o.String()[from:])
	return 0
}

// TestChatInATerminal runs `suzuran chat --temperature 0` on a
// pseudo-terminal: the answer streams, the statistics are dimmed, the first
// Ctrl-C at the prompt only warns and the second quits cleanly.
func TestChatInATerminal(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "chat", "--temperature", "0")
	cmd.Env = append(os.Environ(), suzuranMainEnv+"=1",
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"),
		"XDG_STATE_HOME="+filepath.Join(home, "state"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A session of its own with the terminal as its controlling terminal,
	// so that typing Ctrl-C sends SIGINT to it as in a real shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()

	var out terminalOutput
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			out.mu.Lock()
			out.buf.Write(b[:n])
			out.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()

	at := out.waitFor(t, 0, "thinking off.")
	at = out.waitFor(t, at, "> ")
	const question = "What does json.dumps do?"
	master.WriteString(question + "\r")
	at = out.waitFor(t, at, question)
	at = out.waitFor(t, at, chatReference(t, question))
	at = out.waitFor(t, at, "\x1b[2m[prefill 18 tokens at ")
	at = out.waitFor(t, at, "> ")

	master.WriteString("\x03")
	out.waitFor(t, at, "(Ctrl-C again or Ctrl-D to quit)")
	master.WriteString("\x03")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("chat ended with %v after the second Ctrl-C; output:\n%q", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("chat is still running after a second Ctrl-C; output:\n%q", out.String())
	}
}
