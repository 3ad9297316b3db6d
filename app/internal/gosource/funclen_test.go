package gosource

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	// maxLines is the most lines a function's body may span, braces included.
	maxLines = 100
	// maxParams is the most positional parameters a function in one of
	// paramDirs may take.
	maxParams = 6
)

// paramDirs are the folders whose functions are held to maxParams.
var paramDirs = []string{"engine/cpu/", "engine/gpu/"}

// knownLong are the functions, by file and top-level declaration, that are
// over a limit today and are being split; a function literal inside one of
// them is covered too. An entry that is no longer over a limit fails the
// test, so that this list only shrinks; when it is empty, delete it.
var knownLong = map[string]bool{
	"app/server/documents_test.go TestDocumentsThroughAPI": true,
	"app/server/images_test.go TestImagesThroughAPI":       true,
}

// finding is one function over a limit.
type finding struct {
	key  string // file (slash-separated, relative) and top-level declaration
	at   string // file:line of the function itself
	what string
}

// repoRoot is the repository's root, two folders up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// skipDir says whether a folder holds no Go of the project's own.
func skipDir(name string) bool {
	return name == "node_modules" || name == "testdata" || name == "vendor" ||
		(strings.HasPrefix(name, ".") && name != ".")
}

// check parses every .go file below root, except generated ones, and
// returns the functions over a limit.
func check(root string) ([]finding, error) {
	var found []finding
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		got, err := checkFile(path, filepath.ToSlash(rel))
		found = append(found, got...)
		return err
	})
	return found, err
}

// checkFile returns the functions of one file over a limit, none for a
// generated file.
func checkFile(path, rel string) ([]finding, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	params := false
	for _, dir := range paramDirs {
		params = params || strings.HasPrefix(rel, dir)
	}
	var found []finding
	for _, decl := range f.Decls {
		key := rel + " " + declName(decl)
		ast.Inspect(decl, func(n ast.Node) bool {
			var body *ast.BlockStmt
			var typ *ast.FuncType
			switch x := n.(type) {
			case *ast.FuncDecl:
				body, typ = x.Body, x.Type
			case *ast.FuncLit:
				body, typ = x.Body, x.Type
			default:
				return true
			}
			if body == nil {
				return true
			}
			at := fmt.Sprintf("%s:%d", rel, fset.Position(n.Pos()).Line)
			if lines := fset.Position(body.End()).Line - fset.Position(body.Pos()).Line + 1; lines > maxLines {
				found = append(found, finding{key, at, fmt.Sprintf("%d lines (at most %d)", lines, maxLines)})
			}
			if n := typ.Params.NumFields(); params && n > maxParams {
				found = append(found, finding{key, at, fmt.Sprintf("%d parameters (at most %d: put them in a struct)", n, maxParams)})
			}
			return true
		})
	}
	return found, nil
}

// declName names a top-level declaration: a function by its name, a
// method by its type and name, a var or const by its first name.
func declName(decl ast.Decl) string {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		return d.Name.Name
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			if vs, ok := spec.(*ast.ValueSpec); ok && len(vs.Names) > 0 {
				return vs.Names[0].Name
			}
		}
	}
	return "(declaration)"
}

// TestFunctionSize walks the repository: a function over a limit that is
// not in knownLong fails, and so does an entry of knownLong that no longer
// is over one.
func TestFunctionSize(t *testing.T) {
	found, err := check(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range found {
		seen[f.key] = true
		if !knownLong[f.key] {
			t.Errorf("%s: %s: split it", f.at, f.what)
		}
	}
	var stale []string
	for key := range knownLong {
		if !seen[key] {
			stale = append(stale, key)
		}
	}
	sort.Strings(stale)
	for _, key := range stale {
		t.Errorf("%s is within the limits now: remove it from knownLong", key)
	}
}

// TestCheckFindsLongFunctions runs the check on a folder made for it: a
// function one line over, a literal at package level over, a
// function with too many parameters under engine/cpu, and the same in a
// generated file, which is left out, as is a file of assembly.
func TestCheckFindsLongFunctions(t *testing.T) {
	root := t.TempDir()
	body := func(lines int) string { // a body spanning lines lines, braces included
		return "{\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	write := func(rel, src string) {
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("app/long.go", "package app\n\nfunc atLimit() "+body(maxLines)+"\nfunc overLimit() "+body(maxLines+1))
	write("app/lit_test.go", "package app\n\nvar lit = func() "+body(maxLines+1))
	write("engine/cpu/params.go", "package cpu\n\nfunc six(a, b, c, d, e, f int) {}\n\nfunc seven(a, b, c, d, e, f int, g float32) {}\n")
	write("app/params.go", "package app\n\nfunc seven(a, b, c, d, e, f, g int) {}\n")
	write("app/gen.go", "// Code generated by hand for this test. DO NOT EDIT.\n\npackage app\n\nfunc generated() "+body(maxLines+50))
	write("app/long_amd64.s", "TEXT ·overLimit(SB), 0, $0\n"+strings.Repeat("\tNOP\n", maxLines+50)+"\tRET\n")
	write("app/testdata/long.go", "package app\n\nfunc data() "+body(maxLines+50))

	found, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.key+" @ "+f.at+": "+f.what)
	}
	want := []string{
		fmt.Sprintf("app/lit_test.go lit @ app/lit_test.go:3: %d lines (at most %d)", maxLines+1, maxLines),
		fmt.Sprintf("app/long.go overLimit @ app/long.go:104: %d lines (at most %d)", maxLines+1, maxLines),
		fmt.Sprintf("engine/cpu/params.go seven @ engine/cpu/params.go:5: 7 parameters (at most %d: put them in a struct)", maxParams),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("check found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
