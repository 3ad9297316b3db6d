package release

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/gpu/metal"
	"github.com/suzuran-app/suzuran/metalkernels"
)

// kernelFiles are the .metal files the binary embeds, sorted.
func kernelFiles() []string {
	var files []string
	for name := range metalkernels.Sources() {
		if strings.HasSuffix(name, ".metal") {
			files = append(files, name)
		}
	}
	sort.Strings(files)
	return files
}

// libraryPath is where the bundle's precompiled library must lie: the name
// the binary looks for (engine/gpu/metal), from its embedded sources.
func libraryPath(app string) string {
	return filepath.Join(app, "Contents", "Resources", metal.BundledLibraryName(metalkernels.Sources()))
}

// checkKernelSteps checks that a dry run of make app compiles every kernel
// file on its own with -Werror at MSL 3.1 for macOS 14, and links them
// into the library the binary loads, in the bundle, before signing it.
func checkKernelSteps(t *testing.T, log, app string) {
	t.Helper()
	src := filepath.Join(repoRoot(t), "metalkernels")
	var airs []string
	for _, f := range kernelFiles() {
		air := ""
		for _, line := range strings.Split(log, "\n") {
			if strings.HasPrefix(line, "+ xcrun -sdk macosx metal -std=metal3.1 -mmacosx-version-min=14.0 -Werror -I "+src+" -c "+filepath.Join(src, f)+" -o ") {
				air = line[strings.LastIndex(line, " ")+1:]
			}
		}
		if !strings.HasSuffix(air, "/"+strings.TrimSuffix(f, ".metal")+".air") {
			t.Errorf("the dry run does not compile %s with xcrun metal -Werror into its .air:\n%s", f, log)
			continue
		}
		airs = append(airs, air)
	}
	link := "+ xcrun -sdk macosx metallib " + strings.Join(airs, " ") + " -o " + libraryPath(app)
	at := strings.Index(log, link+"\n")
	if at < 0 {
		t.Errorf("the dry run does not link the kernels into %s (%q):\n%s", libraryPath(app), link, log)
	}
	if sign := strings.Index(log, "+ codesign --force --options runtime"); at >= 0 && sign < at {
		t.Errorf("the bundle is signed before its kernel library is in place:\n%s", log)
	}
}

// TestKernelsWithFakeXcrun runs the kernel step for real with a stand-in
// xcrun that logs its arguments and writes what the compiler and the
// linker would: the library lands in the bundle under the name the binary
// looks for — which shows that the shell's digest of the sources is the
// Go one — holding every file's .air, and an older library is removed. A
// file that does not compile stops the step with the compiler's message.
func TestKernelsWithFakeXcrun(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	fake := `#!/bin/sh
echo "$*" >> "` + calls + `"
out= airs=
while [ $# -gt 0 ]; do
	case "$1" in
	-o) out=$2; shift 2; continue ;;
	-c) in=$2
		if [ "${FAKE_FAIL:-}" = "$(basename "$in")" ]; then
			echo "$in:3:1: error: unused variable 'x' [-Werror,-Wunused-variable]" >&2
			exit 1
		fi ;;
	*.air) airs="$airs $1" ;;
	esac
	shift
done
case "$out" in
*.air) echo "air of $in" > "$out" ;;
*.metallib) cat $airs > "$out" ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "xcrun"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(t.TempDir(), "Suzuran.app")
	stale := filepath.Join(app, "Contents", "Resources", "kernels-0000000000000000.metallib")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")
	log, err := script(t, []string{path}, "build/macos/kernels.sh", "--app", app)
	if err != nil {
		t.Fatalf("kernels.sh: %v\n%s", err, log)
	}
	lib, err := os.ReadFile(libraryPath(app))
	if err != nil {
		t.Fatalf("no library where the binary looks for it: %v\n%s", err, log)
	}
	src := filepath.Join(repoRoot(t), "metalkernels")
	for _, f := range kernelFiles() {
		if !strings.Contains(string(lib), "air of "+filepath.Join(src, f)+"\n") {
			t.Errorf("the library lacks %s's .air:\n%s", f, lib)
		}
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the library of older sources was left in the bundle")
	}
	got, _ := os.ReadFile(calls)
	if n := strings.Count(string(got), " metal "); n != len(kernelFiles()) {
		t.Errorf("%d metal compiles for %d kernel files:\n%s", n, len(kernelFiles()), got)
	}

	log, err = script(t, []string{path, "FAKE_FAIL=gemv.metal"}, "build/macos/kernels.sh", "--app", app)
	if err == nil || !strings.Contains(log, "gemv.metal:3:1: error: unused variable") {
		t.Errorf("a kernel that does not compile: %v\n%s", err, log)
	}
}

// Without xcrun the step says where the Metal compiler comes from.
func TestKernelsWithoutXcrun(t *testing.T) {
	if _, err := os.Stat("/usr/bin/xcrun"); err == nil {
		t.Skip("xcrun is installed here")
	}
	app := filepath.Join(t.TempDir(), "Suzuran.app")
	os.MkdirAll(filepath.Join(app, "Contents"), 0o755)
	log, err := script(t, []string{"PATH=/usr/bin:/bin"}, "build/macos/kernels.sh", "--app", app)
	if err == nil || !strings.Contains(log, "xcrun is missing: install Xcode (the Metal compiler comes with it") {
		t.Errorf("without xcrun: %v\n%s", err, log)
	}
}
