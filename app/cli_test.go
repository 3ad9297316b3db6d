package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// wailsVersion is the version wails.json declares (info.productVersion):
// what the Makefile stamps in with -ldflags and what the app bundle carries.
func wailsVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../wails.json")
	if err != nil {
		t.Fatal(err)
	}
	var project struct {
		Info struct {
			ProductVersion string `json:"productVersion"`
		} `json:"info"`
	}
	if err := json.Unmarshal(data, &project); err != nil {
		t.Fatal(err)
	}
	if project.Info.ProductVersion == "" {
		t.Fatal("wails.json has no info.productVersion")
	}
	return project.Info.ProductVersion
}

// The default version (plain `go build`) is the one wails.json declares.
func TestVersionMatchesWailsJSON(t *testing.T) {
	if want := wailsVersion(t); version != want {
		t.Fatalf("version = %q, wails.json info.productVersion = %q: keep them equal", version, want)
	}
}

// TestWindowIdentity checks what the window shows the user: its title is
// the app's name, and the macOS About panel names the app and the version
// wails.json declares.
func TestWindowIdentity(t *testing.T) {
	if windowTitle != "Suzuran" {
		t.Errorf("window title %q, want Suzuran", windowTitle)
	}
	about := aboutBox()
	if want := "Version " + wailsVersion(t); about.Title != windowTitle || about.Message != want || len(about.Icon) == 0 {
		t.Errorf("About panel %q / %q (icon %d bytes), want %q / %q with the app icon", about.Title, about.Message, len(about.Icon), windowTitle, want)
	}
}

// TestMain lets tests run the real command line in a fresh process: the
// test binary re-executed with suzuranMainEnv set runs main instead of the
// tests. A fresh process matters because main sets up the global logger
// and exits with the command's status.
func TestMain(m *testing.M) {
	if os.Getenv(suzuranMainEnv) == "1" {
		os.Args = append([]string{"suzuran"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const suzuranMainEnv = "SUZURAN_TEST_RUN_MAIN"

// execute runs `suzuran args...` and returns its stdout and stderr.
func execute(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), suzuranMainEnv+"=1", "XDG_STATE_HOME="+t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// TestVersionCommand runs the real binary: both spellings print the
// version wails.json declares.
func TestVersionCommand(t *testing.T) {
	want := "suzuran " + wailsVersion(t) + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, stderr, err := execute(t, args...)
		if err != nil {
			t.Fatalf("suzuran %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		if out != want {
			t.Errorf("suzuran %s printed %q, want %q", strings.Join(args, " "), out, want)
		}
	}
}

func TestCommandLineErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"no-such-command"}, "unknown command"},
		{[]string{"version", "extra"}, "unknown command"},
		{[]string{"--log-level", "loud", "version"}, `--log-level "loud"`},
	} {
		_, stderr, err := execute(t, tc.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("suzuran %s: %v, want exit status 1", strings.Join(tc.args, " "), err)
		}
		if !strings.HasPrefix(stderr, "suzuran: ") || !strings.Contains(stderr, tc.want) {
			t.Errorf("suzuran %s printed %q, want an error containing %q", strings.Join(tc.args, " "), stderr, tc.want)
		}
	}
}

// The root command offers exactly the subcommands of the list in cli.go,
// each reachable by name, built fresh for every root (so that flags parsed
// by one command line do not leak into the next).
func TestSubcommands(t *testing.T) {
	root := newRootCmd()
	var names []string
	for _, c := range root.Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			names = append(names, c.Name())
		}
	}
	want := "bench chat check-update doctor extract logits models pull render serve tokenize version"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("subcommands %q, want %q", got, want)
	}
	for _, c := range root.Commands() {
		if found, _, err := root.Find([]string{c.Name()}); err != nil || found != c {
			t.Errorf("subcommand %s is not reachable from the root command: %v", c.Name(), err)
		}
	}
	if other := newRootCmd(); other.Commands()[0] == root.Commands()[0] {
		t.Error("two roots share a subcommand")
	}
}
