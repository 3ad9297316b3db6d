package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write replaces the file whole, with the permissions asked, and leaves no
// temporary file beside it; a write that cannot be made leaves the old
// file as it was.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := os.WriteFile(path, []byte("old contents, longer than the new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	entries, _ := os.ReadDir(dir)
	if string(data) != "new" || st.Mode().Perm() != 0o600 || len(entries) != 1 {
		t.Fatalf("after Write: %q, %v, %d entries in the folder", data, st.Mode().Perm(), len(entries))
	}
	// A folder that does not exist: an error naming the file, nothing written.
	missing := filepath.Join(dir, "no", "f.json")
	if err := Write(missing, []byte("x"), 0o600); err == nil {
		t.Fatal("Write into a missing folder succeeded")
	}
	if data, _ := os.ReadFile(path); string(data) != "new" {
		t.Errorf("the other file changed: %q", data)
	}
}
