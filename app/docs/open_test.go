//go:build unix

package docs

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Paths that are not regular files are refused before they are opened,
// at once: /dev/zero would be read to the size limit (four of them took
// 1.17 GB), and opening a named pipe blocks until a writer comes, which
// once hung extraction past its time limit. Each runs with a 10 s time
// limit and must answer within 5 s (it answers in microseconds; the bound
// is for a loaded machine, and below the limit so that a fallback on the
// time limit fails the test too).
func TestExtractFileRefusesNonFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.txt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	folder := filepath.Join(dir, "notes")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "zero.txt")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, want string }{
		{fifo, "pipe.txt: is a named pipe, not a file; save what it carries to a file and attach that"},
		{sock, "s.sock: is a socket, not a file; only files can be attached"},
		{folder, "notes: is a folder; attach the files inside it instead"},
		{link, "zero.txt: is a device, not a file; only files can be attached"},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, struct{ path, want string }{"/dev/zero", "zero: is a device, not a file; only files can be attached"})
	}
	for _, tc := range cases {
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := ExtractFile(context.Background(), tc.path, Options{Limits: Limits{Timeout: 10 * time.Second}})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotAFile) || err.Error() != tc.want {
				t.Errorf("%s: got %v\nwant %s", tc.path, err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s: answered after %v", tc.path, d)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: no answer after 5 s", tc.path)
		}
	}

	// The open itself does not block on a pipe, in case one takes the
	// place of a file between the check and the open.
	opened := make(chan error, 1)
	go func() {
		f, err := openNoBlock(fifo)
		if err == nil {
			f.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Errorf("opening the pipe: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("opening a pipe blocked")
	}

	// A link to a regular file is read; a missing file is said plainly.
	file := filepath.Join(dir, "lilies.txt")
	if err := os.WriteFile(file, []byte("Lilies of the valley."), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if doc, err := ExtractFile(context.Background(), filepath.Join(dir, "link.txt"), Options{}); err != nil || doc.Text != "Lilies of the valley." {
		t.Errorf("link to a file: %v", err)
	}
	_, err = ExtractFile(context.Background(), filepath.Join(dir, "missing.txt"), Options{})
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "missing.txt: does not exist (it may have been moved or deleted); check its name and folder" {
		t.Errorf("missing: %v", err)
	}
}
