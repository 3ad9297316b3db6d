package main

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/suzuran-app/suzuran/app/internal/fakehub"
)

// TestPullOntoAFullDisk points the cache at a 1 MB tmpfs, too small for
// the 1.4 MB model: pull refuses before downloading and says how much to
// free, and --force does not override a disk that cannot hold it.
func TestPullOntoAFullDisk(t *testing.T) {
	h := fakehub.New(t)
	h.AddDir(t, tinyRepo, tinyModel)
	home, _ := hubEnv(t, h)
	small := filepath.Join(home, "small")
	if err := unixMkdirMount(small, "1m"); err != nil {
		t.Skipf("cannot mount a 1 MB tmpfs (%v: needs root or CAP_SYS_ADMIN); app/hub's tests cover the full disk with /dev/full", err)
	}
	t.Cleanup(func() { unix.Unmount(small, 0) })
	t.Setenv("HF_HUB_CACHE", small)
	for _, args := range [][]string{{"pull", tinyRepo}, {"pull", tinyRepo, "--force"}} {
		_, stderr, err := execute(t, args...)
		if err == nil || !strings.Contains(stderr, "refused: The download needs 1.40 MB and the disk has") || !strings.Contains(stderr, "not enough free disk space") {
			t.Errorf("%s: %v, stderr:\n%s\nwant a refusal naming the space", strings.Join(args, " "), err, stderr)
		}
	}
	if n := h.FileRequests(); n != 0 {
		t.Errorf("%d file requests for a download that cannot fit", n)
	}
}

func unixMkdirMount(dir, size string) error {
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return err
	}
	return unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size)
}
