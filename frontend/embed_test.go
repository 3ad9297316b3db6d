package frontend

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// The embedded copy must match what is on disk: with a built dist/ it
// serves index.html and the scripts it names; without one it says how to
// build it rather than serving an empty window.
func TestDistMatchesBuildState(t *testing.T) {
	_, statErr := os.Stat("dist/index.html")
	built := statErr == nil

	assets, err := Dist()
	if !built {
		if !errors.Is(err, ErrNotBuilt) {
			t.Fatalf("dist/index.html is absent, Dist() error = %v, want ErrNotBuilt", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("dist/index.html exists but Dist() failed: %v", err)
	}
	index, err := fs.ReadFile(assets, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile("dist/index.html")
	if err != nil {
		t.Fatal(err)
	}
	if string(index) != string(onDisk) {
		t.Fatal("embedded index.html differs from dist/index.html")
	}
	// Every script the page loads must be embedded too.
	scripts := strings.Split(string(index), `src="./`)[1:]
	if len(scripts) == 0 {
		t.Fatal("the built index.html loads no script")
	}
	for _, part := range scripts {
		name := part[:strings.IndexByte(part, '"')]
		if _, err := fs.Stat(assets, name); err != nil {
			t.Errorf("index.html loads %s, which is not embedded: %v", name, err)
		}
	}
}
