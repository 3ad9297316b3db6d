package release

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/app/internal/bundle"
)

// repoRoot is the repository's root, three folders up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "wails.json")); err != nil {
		t.Fatalf("no wails.json at %s: %v", root, err)
	}
	return root
}

// projectVersion is info.productVersion of wails.json.
func projectVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "wails.json"))
	if err != nil {
		t.Fatal(err)
	}
	var project struct {
		Info struct{ ProductVersion string }
	}
	if err := json.Unmarshal(data, &project); err != nil || project.Info.ProductVersion == "" {
		t.Fatalf("wails.json: no info.productVersion (%v)", err)
	}
	return project.Info.ProductVersion
}

// standInBinary is a real executable to package: the test's own binary.
func standInBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// script runs one of the repository's scripts with extra environment and
// returns its combined output.
func script(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(t), name), args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cleanEnv is the environment without signing and notarisation settings,
// so that a developer's own do not change what the scripts do here.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SUZURAN_") || strings.HasPrefix(name, "APPLE_") || name == "DRY_RUN" || name == "DMG_STAGING" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func readPlist(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dict, err := bundle.ParsePlist(data)
	if err != nil {
		t.Fatalf("%s: not a valid property list: %v", path, err)
	}
	return dict
}

func pngSize(t *testing.T, path string) (int, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cfg.Width, cfg.Height
}

// The dry run of make app makes Suzuran.app with the usual layout and the
// image's folder, and would sign with the hardened runtime and the
// entitlements, name the image after the version, and notarise only with a
// Developer ID and credentials.
func TestMakeAppDryRun(t *testing.T) {
	version := projectVersion(t)
	binary := standInBinary(t)
	for _, tc := range []struct {
		name     string
		env      []string
		want     []string // lines (or parts of lines) the output must have
		wantNot  []string
		identity string
	}{
		{
			name: "unsigned",
			want: []string{
				"+ codesign --force --options runtime --entitlements " + filepath.Join(repoRoot(t), "build/macos/entitlements.plist") + " --sign - ",
				"+ codesign --verify --strict",
				"hdiutil create -quiet -srcfolder",
				`-volname Suzuran\ ` + version,
				"+ hdiutil convert -quiet",
				"Suzuran-" + version + ".dmg",
				"not notarising: the app is signed ad hoc",
			},
			wantNot: []string{"notarytool", "--timestamp"},
		},
		{
			name: "Developer ID without notary credentials",
			env:  []string{"SUZURAN_SIGN_IDENTITY=Developer ID Application: Example (ABCDE12345)"},
			want: []string{
				`--options runtime --entitlements ` + filepath.Join(repoRoot(t), "build/macos/entitlements.plist") + ` --timestamp --sign Developer\ ID\ Application:\ Example\ \(ABCDE12345\)`,
				"+ codesign --force --timestamp --sign", // the image
				"not notarising: no notary credentials",
			},
			wantNot: []string{"notarytool submit"},
		},
		{
			name: "Developer ID and an API key",
			env: []string{"SUZURAN_SIGN_IDENTITY=Developer ID Application: Example (ABCDE12345)",
				"APPLE_API_KEY_PATH=/keys/AuthKey.p8", "APPLE_API_KEY_ID=KEY123", "APPLE_API_ISSUER=issuer-uuid"},
			want: []string{
				"+ xcrun notarytool submit",
				"--wait --output-format plist --key /keys/AuthKey.p8 --key-id KEY123 --issuer issuer-uuid",
				"+ xcrun stapler staple",
				"+ xcrun stapler validate",
			},
		},
		{
			name: "Developer ID and an Apple ID",
			env: []string{"SUZURAN_SIGN_IDENTITY=Developer ID Application: Example (ABCDE12345)",
				"APPLE_ID=dev@example.com", "APPLE_TEAM_ID=ABCDE12345", "APPLE_APP_PASSWORD=abcd-efgh"},
			want: []string{"--apple-id dev@example.com --team-id ABCDE12345 --password abcd-efgh", "+ xcrun stapler staple"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			log, err := script(t, tc.env, "build/macos/make-app.sh", "--dry-run", "--binary", binary, "--out-dir", out)
			if err != nil {
				t.Fatalf("make-app.sh --dry-run: %v\n%s", err, log)
			}
			for _, want := range tc.want {
				if !strings.Contains(log, want) {
					t.Errorf("the dry run does not say %q:\n%s", want, log)
				}
			}
			for _, not := range tc.wantNot {
				if strings.Contains(log, not) {
					t.Errorf("the dry run says %q, which it must not here:\n%s", not, log)
				}
			}
			// hdiutil create and convert go through retry_busy.
			for _, step := range []string{"+ hdiutil create ", "+ hdiutil convert "} {
				found := false
				for _, line := range strings.Split(log, "\n") {
					if strings.HasPrefix(line, step) {
						found = true
						if !strings.HasSuffix(line, `# again while "Resource busy", up to 6 tries`) {
							t.Errorf("%q is not retried while busy: %s", step, line)
						}
					}
				}
				if !found {
					t.Errorf("the dry run has no %q line:\n%s", step, log)
				}
			}
			checkAppBundle(t, filepath.Join(out, "Suzuran.app"), binary, version)
			checkKernelSteps(t, log, filepath.Join(out, "Suzuran.app"))
			checkImageFolder(t, filepath.Join(out, "dmg-staging"), binary, version)
		})
	}
}

// retry_busy (build/macos/lib.sh, which dmg.sh runs hdiutil create and
// convert through) against a stand-in hdiutil that fails with hdiutil's
// "Resource busy" message a given number of times, or with another error:
// it tries again only while busy, up to 6 times, and then says what to do.
func TestRetryWhileBusy(t *testing.T) {
	dir := t.TempDir()
	fake := `#!/usr/bin/env bash
n=$(cat "$FAKE_DIR/calls" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$FAKE_DIR/calls"
if [ "$n" -le "$FAKE_FAILS" ]; then
	echo "hdiutil: $1 failed - $FAKE_ERROR" >&2
	exit 1
fi
echo "created $*"
`
	if err := os.WriteFile(filepath.Join(dir, "hdiutil"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		fails     int
		error     string
		wantCalls int
		wantOK    bool
		want      []string
	}{
		{"busy twice", 2, "Resource busy", 3, true, []string{"resource busy; trying again in 0 s (2 of 6)", "created create -quiet -ov x.dmg"}},
		{"busy throughout", 100, "Resource busy", 6, false, []string{`hdiutil create: still "Resource busy" after 6 tries; close Finder windows`}},
		{"another error", 100, "No space left on device", 1, false, []string{"hdiutil: create failed - No space left on device"}},
		{"no error", 0, "", 1, true, []string{"created create"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, "calls"))
			cmd := exec.Command("bash", "-c", `set -euo pipefail; source build/macos/lib.sh; busy_delay=0; retry_busy hdiutil create -quiet -ov x.dmg; echo "after: ok"`)
			cmd.Dir = repoRoot(t)
			cmd.Env = append(cleanEnv(), "PATH="+dir+":"+os.Getenv("PATH"), "FAKE_DIR="+dir,
				"FAKE_FAILS="+strconv.Itoa(tc.fails), "FAKE_ERROR="+tc.error)
			out, err := cmd.CombinedOutput()
			log := string(out)
			if ok := err == nil && strings.Contains(log, "after: ok"); ok != tc.wantOK {
				t.Errorf("succeeded %v (%v), want %v:\n%s", ok, err, tc.wantOK, log)
			}
			calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
			if got := strings.TrimSpace(string(calls)); got != strconv.Itoa(tc.wantCalls) {
				t.Errorf("hdiutil ran %s times, want %d:\n%s", got, tc.wantCalls, log)
			}
			for _, want := range tc.want {
				if !strings.Contains(log, want) {
					t.Errorf("output lacks %q:\n%s", want, log)
				}
			}
		})
	}
}

// checkAppBundle checks the layout of Suzuran.app and its Info.plist.
func checkAppBundle(t *testing.T, app, binary, version string) {
	t.Helper()
	contents := filepath.Join(app, "Contents")
	for _, rel := range []string{"Info.plist", "PkgInfo", "MacOS", "Resources/appicon.icns"} {
		if _, err := os.Stat(filepath.Join(contents, rel)); err != nil {
			t.Errorf("Suzuran.app lacks Contents/%s: %v", rel, err)
		}
	}
	dict := readPlist(t, filepath.Join(contents, "Info.plist"))
	for _, key := range []string{"CFBundleName", "CFBundleIdentifier", "CFBundleExecutable", "CFBundleIconFile",
		"CFBundlePackageType", "CFBundleShortVersionString", "CFBundleVersion", "CFBundleInfoDictionaryVersion"} {
		if s, _ := dict[key].(string); s == "" {
			t.Errorf("Info.plist: %s is missing or empty", key)
		}
	}
	for key, want := range map[string]any{
		"LSUIElement":                true,
		"LSMinimumSystemVersion":     "14.0",
		"CFBundleShortVersionString": version,
		"CFBundleVersion":            version,
		"CFBundlePackageType":        "APPL",
	} {
		if got := dict[key]; got != want {
			t.Errorf("Info.plist: %s = %#v, want %#v", key, got, want)
		}
	}
	exe := filepath.Join(contents, "MacOS", dict["CFBundleExecutable"].(string))
	info, err := os.Stat(exe)
	if err != nil {
		t.Fatalf("the executable Info.plist names: %v", err)
	}
	if info.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable (%v)", exe, info.Mode())
	}
	got, _ := os.ReadFile(exe)
	want, _ := os.ReadFile(binary)
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the binary it was given", exe)
	}
	icon, _ := os.ReadFile(filepath.Join(contents, "Resources", dict["CFBundleIconFile"].(string)))
	if !bytes.HasPrefix(icon, []byte("icns")) {
		t.Errorf("the icon Info.plist names is not an .icns file")
	}
	if pkg, _ := os.ReadFile(filepath.Join(contents, "PkgInfo")); string(pkg) != "APPL????" {
		t.Errorf("PkgInfo = %q, want APPL????", pkg)
	}
}

// checkImageFolder checks what goes into the DMG: the app, the link to
// /Applications, and the background at both resolutions.
func checkImageFolder(t *testing.T, staging, binary, version string) {
	t.Helper()
	if target, err := os.Readlink(filepath.Join(staging, "Applications")); err != nil || target != "/Applications" {
		t.Errorf("the image's Applications is not a link to /Applications: %q, %v", target, err)
	}
	checkAppBundle(t, filepath.Join(staging, "Suzuran.app"), binary, version)
	for name, size := range map[string][2]int{"dmg-background.png": {660, 400}, "dmg-background@2x.png": {1320, 800}} {
		if w, h := pngSize(t, filepath.Join(staging, ".background", name)); w != size[0] || h != size[1] {
			t.Errorf("%s is %d×%d, want %d×%d (the window dmg.sh opens)", name, w, h, size[0], size[1])
		}
	}
}

// Each step says what it needs when that is missing.
func TestMacStepsSayWhatIsMissing(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"notarize without credentials", []string{"DRY_RUN=1"}, []string{"build/macos/notarize.sh", "x.dmg"}, "no notarisation credentials: set SUZURAN_NOTARY_PROFILE"},
		{"bundle without a binary", []string{"DRY_RUN=1"}, []string{"build/macos/bundle.sh", "--binary", "/nonexistent/suzuran"}, "does not exist: build it first (make build)"},
		{"unknown argument", nil, []string{"build/macos/make-app.sh", "--sign"}, "unknown argument --sign"},
	}
	if runtime.GOOS != "darwin" {
		cases = append(cases, struct {
			name string
			env  []string
			args []string
			want string
		}{"a real run off macOS", nil, []string{"build/macos/make-app.sh"}, "needs macOS (this is Linux); on Linux, make package-linux builds the .deb"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := script(t, tc.env, tc.args[0], tc.args[1:]...)
			if err == nil {
				t.Fatalf("succeeded:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output does not say %q:\n%s", tc.want, out)
			}
		})
	}
}

// make app off macOS says bundling needs macOS and what to run instead.
func TestMakeAppOffMacOS(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("on macOS make app builds the app; the macOS workflow runs it")
	}
	cmd := exec.Command("make", "--no-print-directory", "app")
	cmd.Dir = repoRoot(t)
	// Run as a fresh make, not as a child of the make running the tests.
	for _, kv := range cleanEnv() {
		if name, _, _ := strings.Cut(kv, "="); name != "MAKEFLAGS" && name != "MFLAGS" && name != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make app succeeded off macOS:\n%s", out)
	}
	for _, want := range []string{"needs macOS", "make package-linux", "make build", "make-app.sh --dry-run"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make app does not say %q:\n%s", want, out)
		}
	}
}

// The entitlements file is a property list whose dict grants nothing the
// comment above it does not justify: today, nothing.
func TestEntitlements(t *testing.T) {
	path := filepath.Join(repoRoot(t), "build/macos/entitlements.plist")
	dict := readPlist(t, path)
	if len(dict) != 0 {
		t.Errorf("entitlements.plist grants %v; each entitlement needs its reason in the file's comment and in this test", dict)
	}
	data, _ := os.ReadFile(path)
	if !bytes.Contains(data, []byte(`<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN"`)) {
		t.Error("entitlements.plist lacks the plist DOCTYPE codesign expects")
	}
}
