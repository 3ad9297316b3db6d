package metalkernels

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The embedded set must be exactly the kernel files in the directory, so a
// new .metal file or header can never be left out of the binary.
func TestSourcesMatchDirectory(t *testing.T) {
	src := Sources()
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		name := f.Name()
		if f.IsDir() || !(strings.HasSuffix(name, ".metal") || strings.HasSuffix(name, ".h")) {
			continue
		}
		n++
		b, err := os.ReadFile(filepath.Join(".", name))
		if err != nil {
			t.Fatal(err)
		}
		if src[name] != string(b) {
			t.Errorf("%s: embedded text differs from the file", name)
		}
	}
	if n == 0 || len(src) != n {
		t.Errorf("embedded %d sources, directory has %d", len(src), n)
	}
	if _, ok := src["common.h"]; !ok {
		t.Error("common.h, which every kernel includes, is not embedded")
	}
}
