//go:build unix

package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// suzuran extract on a named pipe, a device and a folder: each is refused
// with its reason, without being opened (a pipe once hung the command past
// --timeout 3s forever), and the command ends well within the time limit.
func TestExtractCommandRefusesNonFiles(t *testing.T) {
	model := filepath.Join("..", "assets", "models", "suzuran-tiny")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.txt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"extract", "--timeout", "3s", "--model", model, fifo, "/dev/zero", dir})
	done := make(chan error, 1)
	go func() { done <- root.Execute() }()
	select {
	case err := <-done:
		if err == nil || err.Error() != "3 of 3 files could not be read" {
			t.Errorf("error %v", err)
		}
	case <-time.After(10 * time.Second): // 3 s for each of the files at most, were they to time out
		t.Fatal("suzuran extract --timeout 3s on a named pipe did not return within 10 s")
	}
	for _, want := range []string{
		"pipe.txt: is a named pipe, not a file; save what it carries to a file and attach that\n",
		"zero: is a device, not a file; only files can be attached\n",
		filepath.Base(dir) + ": is a folder; attach the files inside it instead\n",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if out.Len() != 0 {
		t.Errorf("stdout: %q", out.String())
	}
}
