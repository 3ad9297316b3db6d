package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/suzuran-app/suzuran/engine/gpu/metal"
	"github.com/suzuran-app/suzuran/metalkernels"
)

// The files written are the device's translation units, byte for byte:
// what Apple's offline compiler checks in CI is what the app compiles.
func TestWriteMatchesTranslationUnits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "msl")
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	units, err := metal.TranslationUnits(metalkernels.Sources(), "metalkernels/")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(units) || len(units) == 0 {
		t.Fatalf("%d files written for %d units", len(entries), len(units))
	}
	for _, u := range units {
		got, err := os.ReadFile(filepath.Join(dir, filepath.Base(u.Name)))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != u.Text {
			t.Errorf("%s: written text differs from the translation unit", u.Name)
		}
	}
}
