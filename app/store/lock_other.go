//go:build !unix

package store

import "errors"

// ownerLock has no cross-process lock where flock is missing.
type ownerLock struct{}

func lockOwner(path string) (*ownerLock, string, error) { return &ownerLock{}, "", nil }

func (l *ownerLock) release() {}

func freeSpace(dir string) (int64, error) {
	return 0, errors.New("free space unknown on this system")
}
