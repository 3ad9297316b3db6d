package release

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// debToCheck is the package to check: the one make package-linux built
// (SUZURAN_DEB, as make release-check sets it), or else one built here by
// build/linux/package-deb.sh around a stand-in binary, so that `go test`
// alone checks the packaging too. The stand-in is the system's true(1): like
// the real app, and unlike a test binary, it links glibc dynamically.
func debToCheck(t *testing.T) string {
	t.Helper()
	if deb := os.Getenv("SUZURAN_DEB"); deb != "" {
		t.Logf("checking %s (SUZURAN_DEB)", deb)
		return deb
	}
	out := t.TempDir()
	standIn, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	log, err := script(t, nil, "build/linux/package-deb.sh", "--binary", standIn, "--out", out)
	if err != nil {
		t.Fatalf("package-deb.sh: %v\n%s", err, log)
	}
	debs, _ := filepath.Glob(filepath.Join(out, "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("package-deb.sh made %v, want one .deb\n%s", debs, log)
	}
	t.Logf("checking %s, built around a stand-in binary", filepath.Base(debs[0]))
	return debs[0]
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: run make deps (it installs dpkg's tools, desktop-file-utils and ImageMagick)", tool)
		}
	}
}

func command(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The .deb is named after wails.json's version, declares WebKitGTK, has no
// maintainer scripts (nothing left behind on removal), and unpacks into a
// scratch root with every file where a desktop looks for it.
func TestDebPackage(t *testing.T) {
	need(t, "dpkg-deb", "apt-get", "desktop-file-validate", "convert")
	deb := debToCheck(t)
	version := projectVersion(t)
	arch := strings.TrimSpace(command(t, "dpkg", "--print-architecture"))
	if want := "suzuran_" + strings.Replace(version, "-", "~", 1) + "_" + arch + ".deb"; filepath.Base(deb) != want {
		t.Errorf("package file %s, want %s", filepath.Base(deb), want)
	}

	root := t.TempDir()
	command(t, "dpkg", "-x", deb, root)

	fields := map[string]string{}
	for _, name := range []string{"Package", "Version", "Architecture", "Depends", "Maintainer", "Description", "Installed-Size"} {
		fields[name] = strings.TrimSpace(command(t, "dpkg-deb", "--field", deb, name))
		if fields[name] == "" {
			t.Errorf("control has no %s", name)
		}
	}
	if fields["Package"] != "suzuran" || fields["Version"] != strings.Replace(version, "-", "~", 1) || fields["Architecture"] != arch {
		t.Errorf("control says %s %s %s, want suzuran %s %s", fields["Package"], fields["Version"], fields["Architecture"], version, arch)
	}
	if glibc := newestGlibc(t, filepath.Join(root, "usr/bin/suzuran")); glibc == "" {
		t.Error("the packaged binary links no glibc symbols; the app (cgo) and the stand-in (true) both do")
	} else {
		if want := "libc6 (>= " + glibc + ")"; !strings.Contains(fields["Depends"], want) {
			t.Errorf("Depends %q lacks %s, the newest glibc version the binary links", fields["Depends"], want)
		}
	}
	for _, dep := range []string{"libwebkit2gtk-4.1-0", "libgtk-3-0"} {
		if !strings.Contains(fields["Depends"], dep) {
			t.Errorf("Depends %q does not declare %s", fields["Depends"], dep)
		}
	}

	// Only the control file: no preinst/postinst/prerm/postrm, so removal
	// is dpkg deleting what it unpacked.
	control := t.TempDir()
	command(t, "dpkg-deb", "--control", deb, control)
	entries, _ := os.ReadDir(control)
	for _, e := range entries {
		if e.Name() != "control" && e.Name() != "md5sums" {
			t.Errorf("the package has a maintainer script or extra control file %s", e.Name())
		}
	}
	// Every file belongs to root, as a system package's must.
	for _, line := range strings.Split(strings.TrimSpace(command(t, "dpkg-deb", "--contents", deb)), "\n") {
		if f := strings.Fields(line); len(f) < 2 || f[1] != "root/root" {
			t.Errorf("not owned by root/root: %s", line)
		}
	}

	// apt resolves its dependencies on this system (a simulation: nothing
	// is installed).
	if sim := command(t, "apt-get", "install", "--simulate", "--no-install-recommends", deb); !strings.Contains(sim, "Inst suzuran") {
		t.Errorf("apt-get install --simulate %s would not install it:\n%s", deb, sim)
	}

	exe, err := os.Stat(filepath.Join(root, "usr/bin/suzuran"))
	if err != nil || exe.Mode()&0o111 == 0 {
		t.Errorf("/usr/bin/suzuran missing or not executable: %v", err)
	}

	entry := filepath.Join(root, "usr/share/applications/suzuran.desktop")
	command(t, "desktop-file-validate", entry)
	keys := desktopEntry(t, entry)
	if keys["Type"] != "Application" || keys["Name"] != "Suzuran" || keys["Terminal"] != "false" {
		t.Errorf("desktop entry: Type=%q Name=%q Terminal=%q", keys["Type"], keys["Name"], keys["Terminal"])
	}
	// Exec's program is found on PATH (/usr/bin) in the unpacked root.
	program := strings.Fields(keys["Exec"])
	if len(program) == 0 {
		t.Fatal("desktop entry has no Exec")
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin", program[0])); err != nil {
		t.Errorf("Exec=%s names no program in /usr/bin: %v", keys["Exec"], err)
	}
	// Icon is a theme name with a PNG at each usual size and an SVG.
	icon := keys["Icon"]
	if icon == "" || strings.ContainsAny(icon, "/.") {
		t.Fatalf("Icon=%q, want a theme icon name", icon)
	}
	for _, size := range []int{16, 22, 24, 32, 48, 64, 128, 256, 512} {
		dir := filepath.Join(root, "usr/share/icons/hicolor", strconv.Itoa(size)+"x"+strconv.Itoa(size), "apps")
		if w, h := pngSize(t, filepath.Join(dir, icon+".png")); w != size || h != size {
			t.Errorf("hicolor %dx%d icon is %d×%d", size, size, w, h)
		}
	}
	if svg, err := os.ReadFile(filepath.Join(root, "usr/share/icons/hicolor/scalable/apps", icon+".svg")); err != nil || !strings.Contains(string(svg), "<svg") {
		t.Errorf("no scalable SVG icon: %v", err)
	}
	if copyright, err := os.ReadFile(filepath.Join(root, "usr/share/doc/suzuran/copyright")); err != nil || !strings.Contains(string(copyright), "MIT") {
		t.Errorf("no copyright file naming the licence: %v", err)
	}
}

// newestGlibc is the highest GLIBC_x.y symbol version an ELF binary asks
// for, read with debug/elf (the script uses objdump), or "" for none.
func newestGlibc(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	symbols, err := f.DynamicSymbols()
	if err != nil {
		return "" // a static binary
	}
	newest := ""
	for _, s := range symbols {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if ok && (newest == "" || versionLess(newest, v)) {
			newest = v
		}
	}
	return newest
}

// versionLess compares dotted numbers such as 2.17 and 2.3.4.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// desktopEntry reads the [Desktop Entry] group's keys.
func desktopEntry(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	group := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			group = line
		case group == "[Desktop Entry]":
			if k, v, ok := strings.Cut(line, "="); ok {
				keys[k] = v
			}
		}
	}
	return keys
}
