package metal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLibraryChoice: the bundled library is preferred when it exists and
// loads; one that fails to load, or none, falls back to compiling the
// sources; whichever it was, the choice is made once.
func TestLibraryChoice(t *testing.T) {
	dir := t.TempDir()
	bundled := filepath.Join(dir, "kernels-0123456789abcdef.metallib")
	if err := os.WriteFile(bundled, []byte("MTLB"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		path       string
		loadErr    error
		compileErr error
		want       string
		loads      int // loadBundled calls
		compiles   int
		err        string
	}{
		{"bundled present", bundled, nil, nil, LibraryBundled, 1, 0, ""},
		{"bundled fails to load", bundled, errors.New("Invalid library file"), nil, LibraryCompiled, 1, 1, ""},
		{"no bundle", "", nil, nil, LibraryCompiled, 0, 1, ""},
		{"bundle without the library", filepath.Join(dir, "other.metallib"), nil, nil, LibraryCompiled, 0, 1, ""},
		{"neither", bundled, errors.New("Invalid library file"), errors.New("compiling gemv.metal: error"), "", 1, 1, "the bundled library " + bundled + " did not load either: Invalid library file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ch libraryChoice
			loads, compiles := 0, 0
			load := func(p string) error {
				loads++
				if p != c.path {
					t.Errorf("loaded %s, want %s", p, c.path)
				}
				return c.loadErr
			}
			compile := func() error { compiles++; return c.compileErr }
			for range 3 { // cached: the second and third calls do nothing
				err := ch.load(c.path, load, compile)
				if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
			}
			if ch.source != c.want || loads != c.loads || compiles != c.compiles {
				t.Errorf("source %q after %d loads and %d compiles, want %q, %d, %d", ch.source, loads, compiles, c.want, c.loads, c.compiles)
			}
			if (ch.bundledErr != nil) != (c.loadErr != nil) {
				t.Errorf("bundledErr %v, want the load's error %v", ch.bundledErr, c.loadErr)
			}
		})
	}
}

// TestBundledLibraryPath: the library lies in the bundle's Resources,
// named after the sources' digest, so that a library built from other
// sources is never loaded; the environment overrides it.
func TestBundledLibraryPath(t *testing.T) {
	t.Setenv(LibraryEnv, "")
	src := map[string]string{"a.metal": "kernel void a() {}", "common.h": "#pragma once\n"}
	exe := "/Applications/Suzuran.app/Contents/MacOS/suzuran"
	got := BundledLibraryPath(exe, src)
	want := "/Applications/Suzuran.app/Contents/Resources/kernels-" + SourcesDigest(src) + ".metallib"
	if got != want {
		t.Errorf("path %s, want %s", got, want)
	}
	changed := map[string]string{"a.metal": "kernel void a() { }", "common.h": "#pragma once\n"}
	if SourcesDigest(changed) == SourcesDigest(src) {
		t.Error("a changed kernel keeps the digest")
	}
	// The shell's digest (build/macos/kernels.sh) is compared with this
	// one by app/internal/release's dry run of make app.
	if d := SourcesDigest(src); len(d) != 16 || strings.Trim(d, "0123456789abcdef") != "" {
		t.Errorf("digest %q is not 16 hex digits", d)
	}
	t.Setenv(LibraryEnv, "none")
	if p := BundledLibraryPath(exe, src); p != "" {
		t.Errorf("with %s=none: %q, want none", LibraryEnv, p)
	}
	t.Setenv(LibraryEnv, "/tmp/k.metallib")
	if p := BundledLibraryPath(exe, src); p != "/tmp/k.metallib" {
		t.Errorf("with %s set: %q", LibraryEnv, p)
	}
}
