package hub

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestLinkAtOnce: pulls of one repository link the same snapshot file at
// the same time; each succeeds and the link reads the blob.
func TestLinkAtOnce(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	const repo, commit, blob = "org/model", "b7032b3dd606db088a00285125867d1b12f5a64c", "0123abcd"
	if err := os.MkdirAll(filepath.Dir(c.BlobPath(repo, blob)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.BlobPath(repo, blob), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		os.RemoveAll(c.SnapshotDir(repo, commit))
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() { errs <- c.Link(repo, commit, "config.json", blob, 2) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if data, err := os.ReadFile(filepath.Join(c.SnapshotDir(repo, commit), "config.json")); err != nil || string(data) != "{}" {
			t.Fatalf("round %d: the link reads %q, %v", round, data, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(c.SnapshotDir(repo, commit), "*.link"))
	if len(left) > 0 {
		t.Fatalf("temporary links left: %v", left)
	}
}
