package models

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestEmbeddedFilesMatchManifest(t *testing.T) {
	entries, err := manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 6 {
		t.Fatalf("manifest lists %d files, the model folder has 6", len(entries))
	}
	for _, e := range entries {
		data, err := fs.ReadFile(DemoFS(), e.name)
		if err != nil {
			t.Fatalf("embedded %s: %v", e.name, err)
		}
		if sha256.Sum256(data) != e.hash {
			t.Errorf("embedded %s does not match suzuran-tiny.sha256", e.name)
		}
	}
}

func TestInstallVerifiesAndRepairs(t *testing.T) {
	root := t.TempDir()
	dir, err := Install(root)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != root || filepath.Base(dir) != "suzuran-tiny-"+Version() {
		t.Fatalf("installed at %s, want %s/suzuran-tiny-%s", dir, root, Version())
	}
	entries, _ := manifest()
	if err := verifyDir(dir, entries); err != nil {
		t.Fatalf("fresh install does not verify: %v", err)
	}
	// Nothing temporary is left beside it.
	listed, _ := os.ReadDir(root)
	if len(listed) != 1 {
		t.Fatalf("%s holds %d entries after install, want just the model folder", root, len(listed))
	}

	// A damaged file is noticed and the folder rewritten.
	st := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(st, []byte("truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	if verifyDir(dir, entries) == nil {
		t.Fatal("verifyDir accepted a truncated model.safetensors")
	}
	again, err := Install(root)
	if err != nil || again != dir {
		t.Fatalf("reinstall: %q, %v", again, err)
	}
	if err := verifyDir(dir, entries); err != nil {
		t.Fatalf("reinstall did not repair the folder: %v", err)
	}

	// An unexpected extra file also makes the folder not verify.
	if err := os.WriteFile(filepath.Join(dir, "extra.bin"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if verifyDir(dir, entries) == nil {
		t.Fatal("verifyDir accepted a folder with an extra file")
	}
	if _, err := Install(root); err != nil {
		t.Fatal(err)
	}
	if err := verifyDir(dir, entries); err != nil {
		t.Fatalf("reinstall did not clean the extra file: %v", err)
	}
}

// Several installs at once (two app processes starting together) all end
// with the same verified folder.
func TestConcurrentInstalls(t *testing.T) {
	root := t.TempDir()
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	errs := make([]error, 4)
	for i := range dirs {
		wg.Go(func() { dirs[i], errs[i] = Install(root) })
	}
	wg.Wait()
	entries, _ := manifest()
	for i := range dirs {
		if errs[i] != nil {
			t.Fatalf("install %d: %v", i, errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Fatalf("installs disagree: %s and %s", dirs[i], dirs[0])
		}
	}
	if err := verifyDir(dirs[0], entries); err != nil {
		t.Fatal(err)
	}
	listed, _ := os.ReadDir(root)
	if len(listed) != 1 {
		names := []string{}
		for _, d := range listed {
			names = append(names, d.Name())
		}
		t.Fatalf("%s holds %v after concurrent installs, want just the model folder", root, names)
	}
}
