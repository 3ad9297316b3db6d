//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
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
		time.Sleep(10 * time.Millisecond) // a terminal's output has no event: it is read again
	}
	t.Fatalf("the terminal never showed %q; it shows:\n%q", s, o.String()[from:])
	return 0
}

// startChatOnPTY starts `suzuran chat args...` on a pseudo-terminal in a
// session of its own and collects what it writes; the channel delivers its
// exit.
func startChatOnPTY(t *testing.T, args ...string) (master *os.File, out *terminalOutput, exited chan error) {
	t.Helper()
	master, slave := openPTY(t)
	t.Cleanup(func() { master.Close() })
	cmd := chatProcess(t, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A session of its own with the terminal as its controlling terminal,
	// so that typing Ctrl-C sends SIGINT to it as in a real shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	out = &terminalOutput{}
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
	return master, out, exited
}

// TestChatInATerminal runs `suzuran chat --temperature 0` on a
// pseudo-terminal: the answer streams, the statistics are dimmed, the first
// Ctrl-C at the prompt only warns and the second quits cleanly.
func TestChatInATerminal(t *testing.T) {
	master, out, exited := startChatOnPTY(t, "--temperature", "0")

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

// TestChatShowsPrefillProgress sends a message of about 1,900 tokens: while
// the prompt is read (4 passes of 512) the terminal shows "Reading N
// tokens… P %", and the line is cleared before the answer.
func TestChatShowsPrefillProgress(t *testing.T) {
	master, out, _ := startChatOnPTY(t, "--temperature", "0", "--max-tokens", "4")
	at := out.waitFor(t, 0, "> ")
	master.WriteString(strings.Repeat("json dumps loads ", 300) + "\r")
	at = out.waitFor(t, at, "\x1b[2K\x1b[2mReading 1,")
	at = out.waitFor(t, at, " tokens… 0 %")
	at = out.waitFor(t, at, " %\x1b[0m")
	at = out.waitFor(t, at, "\r\x1b[2K")
	out.waitFor(t, at, "[prefill 1,")
}
