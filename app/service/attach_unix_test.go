//go:build unix

package service

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Files dropped on the desktop window that are not files: each chip fails
// at once with its reason, without the path being opened (a named pipe
// blocked the reading forever; /dev/zero was read to the 100 MB limit, and
// four of them held 1.17 GB).
func TestAttachFilesRefusesNonFiles(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.txt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "notes")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"pipe.txt": "is a named pipe, not a file; save what it carries to a file and attach that",
		"zero":     "is a device, not a file; only files can be attached",
		"notes":    "is a folder; attach the files inside it instead",
	}
	start := time.Now()
	views := svc.ui.AttachFiles([]string{fifo, "/dev/zero", folder})
	for _, v := range views {
		got := waitAttached(t, svc.Service, v.ID)
		if got.State != AttachmentFailed || got.Error != want[got.Name] {
			t.Errorf("%s: %+v; want failed with %q", got.Name, got, want[got.Name])
		}
	}
	// Answered in milliseconds; 10 s is for a loaded machine, and far below
	// the two-minute extraction limit a pipe would otherwise wait out.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refused after %v", d)
	}
}
