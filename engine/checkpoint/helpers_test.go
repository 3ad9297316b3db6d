package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedDir finds /work/shared (the folder next to the module root) by
// walking up from the test's directory to go.mod.
func sharedDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			s := filepath.Join(dir, "..", "shared")
			if _, err := os.Stat(s); err != nil {
				t.Fatalf("shared fixtures not found at %s: %v", s, err)
			}
			return s
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

func fixture(t testing.TB, parts ...string) string {
	return filepath.Join(append([]string{sharedDir(t), "fixtures"}, parts...)...)
}
