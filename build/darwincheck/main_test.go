package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file that is not Mach-O (here a shell script) is refused; the real
// binaries are checked by `make darwin-check` itself.
func TestMachODescriptionRefusesOtherFormats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if desc, err := machoDescription(path); err == nil {
		t.Fatalf("machoDescription(a shell script) = %q and no error", desc)
	}
}

func writePackage(t *testing.T, files map[string]string) *listedPackage {
	t.Helper()
	dir := t.TempDir()
	p := &listedPackage{ImportPath: "example.com/p", Dir: dir, Name: "p"}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(src, `import "C"`) {
			p.CgoFiles = append(p.CgoFiles, name)
		} else {
			p.GoFiles = append(p.GoFiles, name)
		}
	}
	return p
}

// The type-check reports errors in Go code, including Go code in cgo
// files, and accepts references to C, which it cannot see.
func TestTypeCheck(t *testing.T) {
	good := writePackage(t, map[string]string{
		"a.go":   "package p\n\nfunc Twice(x int) int { return 2 * x }\n",
		"cgo.go": "package p\n\n// int three(void);\nimport \"C\"\n\nfunc Three() int { return int(C.three()) + Twice(0) }\n",
	})
	if n, err := typeCheck([]*listedPackage{good}); err != nil || n != 1 {
		t.Fatalf("typeCheck of a correct package: %d, %v", n, err)
	}

	bad := writePackage(t, map[string]string{
		"cgo.go": "package p\n\nimport \"C\"\n\nfunc Three() int { return int(C.three()) + Twice(\"no\") }\n",
	})
	_, err := typeCheck([]*listedPackage{bad})
	if err == nil || !strings.Contains(err.Error(), "Twice") {
		t.Fatalf("typeCheck of a package calling an undefined function: %v, want an error naming Twice", err)
	}
}
