// Command darwincheck checks, on a machine that is not a Mac, that the
// module builds for macOS on Apple Silicon (darwin/arm64).
//
// Packages split in two by what they need from cgo on darwin:
//
//   - Packages that need no cgo (the engine above all: Metal is reached
//     through purego) are built and vetted with CGO_ENABLED=0, exactly as the
//     Go toolchain will build them on a Mac, and the engine's test binaries
//     are linked into Mach-O executables, which are opened and checked to be
//     arm64 Mach-O programs.
//   - Packages that need cgo there (app/, through Wails and fyne.io/systray,
//     whose macOS parts are Objective-C) cannot be compiled without Apple's
//     SDK. Their Go code, and the Go code of every package they import, is
//     type-checked for darwin/arm64 with go/types instead. References to C.x
//     are not checked (go/types' FakeImportC), nor is the C and Objective-C
//     itself, nor their _test.go files: those need the Mac (see the macOS
//     CI workflow).
//
// Usage: go run ./build/darwincheck [-out dir] [-tags desktop,production]
package main

import (
	"bytes"
	"debug/macho"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

func main() {
	out := flag.String("out", "bin/darwin", "folder for the darwin test binaries")
	tags := flag.String("tags", "desktop,production", "build tags of the real macOS build (Wails needs desktop,production)")
	machoPattern := flag.String("macho", "./engine/...", "packages whose test binaries must link into Mach-O executables")
	flag.Parse()
	if err := run(*out, *tags, *machoPattern); err != nil {
		fmt.Fprintln(os.Stderr, "darwincheck:", err)
		os.Exit(1)
	}
}

// listedPackage is the part of `go list -json` this tool reads.
type listedPackage struct {
	ImportPath  string
	Dir         string
	Name        string
	Standard    bool
	DepOnly     bool
	GoFiles     []string
	CgoFiles    []string
	TestGoFiles []string
	Imports     []string
	ImportMap   map[string]string
	Error       *struct{ Err string }
}

var darwinEnv = []string{"GOOS=darwin", "GOARCH=arm64"}

func run(out, tags, machoPattern string) error {
	start := time.Now()
	// Which packages need cgo on darwin: those with cgo files of their own
	// outside the standard library (whose cgo parts have pure-Go fallbacks),
	// and those that import one.
	all, err := goList(append(darwinEnv, "CGO_ENABLED=1"), tags, "-deps", "./...")
	if err != nil {
		return err
	}
	byPath := map[string]*listedPackage{}
	for _, p := range all {
		byPath[p.ImportPath] = p
	}
	needsCgo := map[string]bool{}
	for _, p := range all { // dependencies come before their importers
		if len(p.CgoFiles) > 0 && !p.Standard {
			needsCgo[p.ImportPath] = true
		}
		for _, imp := range p.Imports {
			if needsCgo[resolve(p, imp)] {
				needsCgo[p.ImportPath] = true
			}
		}
	}
	var pure, cgoBound []string
	for _, p := range all {
		if p.DepOnly {
			continue
		}
		if p.Error != nil {
			return fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		if needsCgo[p.ImportPath] {
			cgoBound = append(cgoBound, p.ImportPath)
		} else {
			pure = append(pure, p.ImportPath)
		}
	}
	fmt.Printf("darwin/arm64: %d packages need no cgo, %d do (%s)\n", len(pure), len(cgoBound), strings.Join(cgoBound, ", "))

	// 1. Build and vet the cgo-free packages for darwin without cgo.
	noCgo := append(darwinEnv, "CGO_ENABLED=0")
	if err := goCmd(noCgo, append([]string{"build", "-tags", tags}, pure...)...); err != nil {
		return fmt.Errorf("building for darwin/arm64 without cgo: %w", err)
	}
	if err := goCmd(noCgo, append([]string{"vet", "-tags", tags}, pure...)...); err != nil {
		return fmt.Errorf("vetting for darwin/arm64 without cgo: %w", err)
	}
	fmt.Printf("darwin/arm64: built and vetted %d packages with CGO_ENABLED=0\n", len(pure))

	// 2. Link the engine's test binaries and check they are arm64 Mach-O.
	if err := checkMachO(noCgo, tags, machoPattern, out, needsCgo); err != nil {
		return err
	}

	// 3. Type-check the cgo-bound packages and everything they import.
	if len(cgoBound) > 0 {
		deps, err := goList(append(darwinEnv, "CGO_ENABLED=1"), tags, append([]string{"-deps"}, cgoBound...)...)
		if err != nil {
			return err
		}
		checked, err := typeCheck(deps)
		if err != nil {
			return err
		}
		fmt.Printf("darwin/arm64: type-checked %s and the %d packages they import (Go code; C parts unchecked)\n",
			strings.Join(cgoBound, ", "), checked-len(cgoBound))
	}
	fmt.Printf("darwin/arm64: all checks passed in %.1f s\n", time.Since(start).Seconds())
	return nil
}

// resolve maps an import path as written to the package it names (vendored
// or standard-library-internal paths differ).
func resolve(p *listedPackage, imp string) string {
	if to, ok := p.ImportMap[imp]; ok {
		return to
	}
	return imp
}

func checkMachO(env []string, tags, pattern, out string, needsCgo map[string]bool) error {
	pkgs, err := goList(env, tags, pattern)
	if err != nil {
		return err
	}
	var withTests []string
	for _, p := range pkgs {
		if len(p.TestGoFiles) > 0 && !needsCgo[p.ImportPath] {
			withTests = append(withTests, p.ImportPath)
		}
	}
	if len(withTests) == 0 {
		return fmt.Errorf("no package matching %s has tests to link for darwin", pattern)
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	// `go test -c -o dir/` writes one pkg.test per package.
	args := append([]string{"test", "-tags", tags, "-c", "-o", out + string(filepath.Separator)}, withTests...)
	if err := goCmd(env, args...); err != nil {
		return fmt.Errorf("linking darwin test binaries: %w", err)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	if len(entries) != len(withTests) {
		return fmt.Errorf("%d packages with tests but %d binaries in %s", len(withTests), len(entries), out)
	}
	for _, e := range entries {
		path := filepath.Join(out, e.Name())
		desc, err := machoDescription(path)
		if err != nil {
			return err
		}
		fmt.Printf("darwin/arm64: %s: %s\n", path, desc)
	}
	return nil
}

// machoDescription opens a binary as Mach-O and returns what file(1) says
// about it, after checking it is an arm64 executable.
func machoDescription(path string) (string, error) {
	f, err := macho.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s is not a Mach-O file: %w", path, err)
	}
	defer f.Close()
	if f.Cpu != macho.CpuArm64 || f.Type != macho.TypeExec {
		return "", fmt.Errorf("%s is Mach-O for %v, type %v; want an arm64 executable", path, f.Cpu, f.Type)
	}
	desc := fmt.Sprintf("Mach-O %v executable", f.Cpu)
	if fileOut, err := exec.Command("file", "-b", path).Output(); err == nil {
		desc = strings.TrimSpace(string(fileOut))
		if !strings.Contains(desc, "Mach-O") {
			return "", fmt.Errorf("file(1) does not see Mach-O in %s: %s", path, desc)
		}
	}
	return desc, nil
}

// typeCheck checks every listed package from source with go/types, in the
// order go list gives (dependencies first), and returns how many it
// checked. Packages with cgo files are checked with FakeImportC.
func typeCheck(pkgs []*listedPackage) (int, error) {
	fset := token.NewFileSet()
	checked := map[string]*types.Package{"unsafe": types.Unsafe}
	sizes := types.SizesFor("gc", "arm64")
	var problems []string
	for _, p := range pkgs {
		if p.ImportPath == "unsafe" {
			continue
		}
		if p.Error != nil {
			return 0, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		var files []*ast.File
		for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return 0, err
			}
			files = append(files, f)
		}
		var errs []string
		conf := types.Config{
			Importer:    importerFunc(func(path string) (*types.Package, error) { return lookup(checked, p, path) }),
			Sizes:       sizes,
			FakeImportC: len(p.CgoFiles) > 0,
			Error:       func(err error) { errs = append(errs, err.Error()) },
		}
		tp, _ := conf.Check(p.ImportPath, fset, files, nil)
		if len(errs) > 0 {
			if len(errs) > 10 {
				errs = append(errs[:10], fmt.Sprintf("… and %d more", len(errs)-10))
			}
			problems = append(problems, fmt.Sprintf("%s:\n  %s", p.ImportPath, strings.Join(errs, "\n  ")))
		}
		checked[p.ImportPath] = tp
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return 0, fmt.Errorf("type errors for darwin/arm64:\n%s", strings.Join(problems, "\n"))
	}
	return len(pkgs), nil
}

func lookup(checked map[string]*types.Package, from *listedPackage, path string) (*types.Package, error) {
	if tp, ok := checked[resolve(from, path)]; ok {
		return tp, nil
	}
	return nil, fmt.Errorf("%s imports %s, which was not checked before it", from.ImportPath, path)
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

func goList(env []string, tags string, args ...string) ([]*listedPackage, error) {
	cmd := exec.Command("go", append([]string{"list", "-e", "-json", "-tags", tags}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []*listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(listedPackage)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func goCmd(env []string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}
