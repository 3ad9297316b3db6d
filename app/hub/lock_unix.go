//go:build unix

package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// lockBlob takes the lock huggingface_hub takes on a blob while writing it
// (flock on .locks/…/<blob>.lock, what Python's filelock uses on Unix), so
// that this process, another suzuran and `hf download` never write the same
// .incomplete file at once. It waits while another holds it.
func lockBlob(ctx context.Context, path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|openNoFollow, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			f.Close()
			return nil, err
		}
	}
}

// openNoFollow makes OpenFile fail on a symbolic link instead of opening
// what it points at.
const openNoFollow = unix.O_NOFOLLOW

// foreignFile says what an opened file is when it is not a regular file of
// this user's with no other name ("" when it is one): a partial download
// is written in place, so a device, a FIFO, someone else's file or a hard
// link to a file elsewhere must not be.
func foreignFile(st os.FileInfo) string {
	if !st.Mode().IsRegular() {
		return fmt.Sprintf("not a regular file (%s)", st.Mode().Type())
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	if int(sys.Uid) != os.Getuid() {
		return fmt.Sprintf("a file of another user (uid %d)", sys.Uid)
	}
	if sys.Nlink > 1 {
		return fmt.Sprintf("a file with %d names (a hard link)", sys.Nlink)
	}
	return ""
}
