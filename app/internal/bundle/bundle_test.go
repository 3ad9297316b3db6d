package bundle

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoFile finds a file at the repository root (where go.mod is).
func repoFile(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, name)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

func renderRepoPlist(t *testing.T) (Meta, map[string]any) {
	t.Helper()
	meta, err := LoadMeta(repoFile(t, "wails.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(repoFile(t, "Info.plist.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := RenderInfoPlist(string(tmpl), meta)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte(`<?xml version="1.0" encoding="UTF-8"?>`)) {
		t.Error("Info.plist does not start with the XML declaration")
	}
	dict, err := ParsePlist(out)
	if err != nil {
		t.Fatalf("rendered Info.plist: %v\n%s", err, out)
	}
	return meta, dict
}

// The repository's Info.plist.tmpl, filled from its wails.json, is a
// well-formed plist that makes a menu-bar-only app for macOS 14 and later.
func TestRepositoryInfoPlist(t *testing.T) {
	meta, dict := renderRepoPlist(t)
	if meta.Name != "Suzuran" || meta.Executable != "suzuran" {
		t.Errorf("wails.json gives name %q and executable %q, want Suzuran and suzuran", meta.Name, meta.Executable)
	}
	want := map[string]any{
		"CFBundleName":               meta.Name,
		"CFBundleDisplayName":        meta.Name,
		"CFBundleIdentifier":         meta.BundleID,
		"CFBundleShortVersionString": meta.Version,
		"CFBundleVersion":            meta.Version,
		"CFBundleExecutable":         meta.Executable,
		"CFBundleIconFile":           "appicon.icns",
		"CFBundlePackageType":        "APPL",
		"NSHumanReadableCopyright":   meta.Copyright,
		"LSUIElement":                true,
		"LSMinimumSystemVersion":     "14.0",
		"NSHighResolutionCapable":    true,
	}
	for key, value := range want {
		if got, ok := dict[key]; !ok {
			t.Errorf("Info.plist has no %s", key)
		} else if got != value {
			t.Errorf("Info.plist %s = %#v, want %#v", key, got, value)
		}
	}
	if arch, _ := dict["LSArchitecturePriority"].([]any); len(arch) != 1 || arch[0] != "arm64" {
		t.Errorf("LSArchitecturePriority = %#v, want [arm64]", dict["LSArchitecturePriority"])
	}
	if !strings.Contains(meta.BundleID, ".") {
		t.Errorf("bundle id %q is not reverse-DNS", meta.BundleID)
	}
}

// Values are escaped: a name with & and < still gives a well-formed plist
// that reads back as the same text.
func TestRenderEscapesValues(t *testing.T) {
	tmpl, err := os.ReadFile(repoFile(t, "Info.plist.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	meta := Meta{Name: `Tom & Jerry's <App>`, BundleID: "a.b", Version: "1.2.3", Copyright: `© "us"`, Executable: "x", IconFile: "i.icns"}
	out, err := RenderInfoPlist(string(tmpl), meta)
	if err != nil {
		t.Fatal(err)
	}
	dict, err := ParsePlist(out)
	if err != nil {
		t.Fatal(err)
	}
	if dict["CFBundleName"] != meta.Name || dict["NSHumanReadableCopyright"] != meta.Copyright {
		t.Errorf("values did not round-trip: %q, %q", dict["CFBundleName"], dict["NSHumanReadableCopyright"])
	}
}

func TestRenderRejectsBrokenTemplates(t *testing.T) {
	meta := Meta{Name: "n", BundleID: "a.b", Version: "1", Copyright: "c", Executable: "x", IconFile: "i"}
	for name, tmpl := range map[string]string{
		"unknown field":  `<plist><dict><key>a</key><string>{{.Nope}}</string></dict></plist>`,
		"not closed":     `<plist><dict><key>a</key><string>{{.Name}}</dict></plist>`,
		"key twice":      `<plist><dict><key>a</key><true/><key>a</key><false/></dict></plist>`,
		"unescaped":      `<plist><dict><key>a</key><string>{{.Name}} & more</string></dict></plist>`,
		"value missing":  `<plist><dict><key>a</key></dict></plist>`,
		"no dict at all": `<plist></plist>`,
	} {
		if _, err := RenderInfoPlist(tmpl, meta); err == nil {
			t.Errorf("%s: rendered without an error", name)
		}
	}
}

func TestLoadMetaNamesTheMissingField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wails.json")
	if err := os.WriteFile(path, []byte(`{"outputfilename":"suzuran","info":{"productName":"Suzuran","productVersion":"1.0.0","copyright":"c"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadMeta(path)
	if err == nil || !strings.Contains(err.Error(), "info.bundleIdentifier") {
		t.Fatalf("LoadMeta without a bundle id: error %v, want one naming info.bundleIdentifier", err)
	}
}

// readICNS splits an .icns file into its entries.
func readICNS(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	if len(data) < 8 || string(data[:4]) != "icns" || int(binary.BigEndian.Uint32(data[4:8])) != len(data) {
		t.Fatalf("bad icns header")
	}
	entries := map[string][]byte{}
	for rest := data[8:]; len(rest) > 0; {
		if len(rest) < 8 {
			t.Fatalf("truncated icns entry")
		}
		n := int(binary.BigEndian.Uint32(rest[4:8]))
		if n < 8 || n > len(rest) {
			t.Fatalf("icns entry %s claims %d bytes, %d left", rest[:4], n, len(rest))
		}
		entries[string(rest[:4])] = rest[8:n]
		rest = rest[n:]
	}
	return entries
}

func TestICNSHasEverySize(t *testing.T) {
	icon, err := os.ReadFile(repoFile(t, "assets/icons/appicon.png"))
	if err != nil {
		t.Fatal(err)
	}
	icns, err := ICNS(icon)
	if err != nil {
		t.Fatal(err)
	}
	entries := readICNS(t, icns)
	for _, s := range icnsSizes {
		img, err := png.Decode(bytes.NewReader(entries[s.kind]))
		if err != nil {
			t.Errorf("%s: %v", s.kind, err)
			continue
		}
		if b := img.Bounds(); b.Dx() != s.edge || b.Dy() != s.edge {
			t.Errorf("%s is %dx%d, want %d", s.kind, b.Dx(), b.Dy(), s.edge)
		}
	}
	if _, err := ICNS(entries["ic09"]); err == nil {
		t.Error("ICNS accepted a 512×512 icon")
	}
}

// The bundle gets the usual layout, with the binary executable and the
// plist that names it.
func TestAssemble(t *testing.T) {
	meta, _ := renderRepoPlist(t)
	tmpl, err := os.ReadFile(repoFile(t, "Info.plist.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	icon, err := os.ReadFile(repoFile(t, "assets/icons/appicon.png"))
	if err != nil {
		t.Fatal(err)
	}
	// Any real file stands for the binary; the test's own executable is one.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "Suzuran.app")
	if err := Assemble(Options{Binary: self, Template: string(tmpl), Meta: meta, IconPNG: icon, Out: out}); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Stat(filepath.Join(out, "Contents", "MacOS", meta.Executable))
	if err != nil {
		t.Fatal(err)
	}
	if exe.Mode()&0o111 == 0 {
		t.Errorf("Contents/MacOS/%s is not executable: %v", meta.Executable, exe.Mode())
	}
	if orig, _ := os.Stat(self); exe.Size() != orig.Size() {
		t.Errorf("copied binary has %d bytes, the original %d", exe.Size(), orig.Size())
	}
	plist, err := os.ReadFile(filepath.Join(out, "Contents", "Info.plist"))
	if err != nil {
		t.Fatal(err)
	}
	dict, err := ParsePlist(plist)
	if err != nil {
		t.Fatal(err)
	}
	if dict["CFBundleExecutable"] != meta.Executable {
		t.Errorf("Info.plist names executable %v, want %s", dict["CFBundleExecutable"], meta.Executable)
	}
	icns, err := os.ReadFile(filepath.Join(out, "Contents", "Resources", "appicon.icns"))
	if err != nil {
		t.Fatal(err)
	}
	if len(readICNS(t, icns)) != len(icnsSizes) {
		t.Error("appicon.icns lacks sizes")
	}
	if pkg, _ := os.ReadFile(filepath.Join(out, "Contents", "PkgInfo")); string(pkg) != "APPL????" {
		t.Errorf("PkgInfo = %q", pkg)
	}
	if err := Assemble(Options{Binary: self, Template: string(tmpl), Meta: meta, IconPNG: icon, Out: filepath.Join(t.TempDir(), "Suzuran")}); err == nil {
		t.Error("Assemble accepted a bundle path without .app")
	}
}
