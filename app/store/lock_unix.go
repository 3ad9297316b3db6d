//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ownerLock is the lock that makes a process the database's owner: flock
// on <database>.lock, held until Close (the system lets it go when the
// process ends, however it ends). The file holds the owner's process id
// for the message another process shows.
type ownerLock struct{ f *os.File }

// lockOwner takes the owner lock without waiting. When another process
// holds it, lock is nil and owner names that process.
func lockOwner(path string) (lock *ownerLock, owner string, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, "", err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, "", fmt.Errorf("locking %s: %w", path, err)
		}
		owner = "another Suzuran process"
		data, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 {
			owner = fmt.Sprintf("another Suzuran process (process id %d)", pid)
		}
		return nil, owner, nil
	}
	// The id is a courtesy for the message; a full disk may refuse it.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &ownerLock{f}, "", nil
}

func (l *ownerLock) release() {
	if l == nil {
		return
	}
	unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
}

// freeSpace is how many bytes an unprivileged user may still write on the
// disk that holds dir.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
