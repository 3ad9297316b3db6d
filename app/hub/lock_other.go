//go:build !unix

package hub

import (
	"context"
	"os"
)

// lockBlob has no cross-process lock where flock is missing.
func lockBlob(ctx context.Context, path string) (unlock func(), err error) { return func() {}, nil }

// openNoFollow: no O_NOFOLLOW here; openPartial's Lstat check remains.
const openNoFollow = 0

// foreignFile accepts any regular file where ownership is not known.
func foreignFile(st os.FileInfo) string {
	if !st.Mode().IsRegular() {
		return "not a regular file"
	}
	return ""
}
