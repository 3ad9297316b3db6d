package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs of the given size (as mount's size= option) on
// a fresh folder for the test, or skips the test saying why it cannot.
func mountTmpfs(t *testing.T, size string) string {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a %s tmpfs to fill (%v: needs root or CAP_SYS_ADMIN); a link to /dev/full cannot stand in, since partial downloads never follow links", size, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	return dir
}

func TestDiskTooSmallIsRefusedBeforeDownloading(t *testing.T) {
	h, _ := newHub(t)
	c := newClient(t, h)
	c.CacheDir = mountTmpfs(t, "1m")
	_, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "free up") || !strings.Contains(err.Error(), "HF_HUB_CACHE") {
		t.Fatalf("err = %v, want ErrDiskFull saying how much to free and where else to put the cache", err)
	}
	t.Log(err)
	if n := h.FileRequests(); n != 0 {
		t.Errorf("%d file requests; nothing should be fetched for a download that cannot fit", n)
	}
}

func TestDiskFullWhileWriting(t *testing.T) {
	const weights = "model.safetensors"
	t.Run("tmpfs", func(t *testing.T) {
		h, repo := newHub(t)
		c := newClient(t, h)
		c.CacheDir = mountTmpfs(t, "2m")
		// Another program fills the disk once the download has started,
		// leaving 200 kB: the space check passed, the writes fail.
		filler := filepath.Join(c.CacheDir, "filler")
		var once sync.Once
		h.BeforeBody = func(path string) {
			if path != weights {
				return
			}
			once.Do(func() {
				free, err := FreeSpace(c.CacheDir)
				if err != nil {
					t.Error(err)
					return
				}
				if err := os.WriteFile(filler, make([]byte, free-200_000), 0o644); err != nil {
					t.Error(err)
				}
			})
		}
		_, err := c.Pull(context.Background(), testRepo, PullOptions{})
		if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "resumes where it stopped") {
			t.Fatalf("err = %v, want ErrDiskFull saying the download resumes", err)
		}
		t.Log(err)
		cache := c.Cache()
		if _, err := os.Lstat(filepath.Join(cache.SnapshotDir(testRepo, repo.Commit), weights)); err == nil {
			t.Fatal("a partly written file was linked into the snapshot")
		}
		st, err := os.Stat(cache.BlobPath(testRepo, repo.Files[weights].SHA256) + ".incomplete")
		if err != nil || st.Size() == 0 {
			t.Fatalf("the partial file should stay for the resume: %v", err)
		}
		written := st.Size()
		os.Remove(filler)
		s, err := c.Pull(context.Background(), testRepo, PullOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkSnapshot(t, c.CacheDir, repo, s)
		if r := h.Ranges(weights); r[len(r)-1] != "bytes="+strconv.FormatInt(written, 10)+"-" {
			t.Errorf("Range headers %q: the pull after freeing space should resume at %d", r, written)
		}
	})
}
