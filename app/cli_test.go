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

// The default version (plain `go build`) is the one wails.json declares,
// which is what the Makefile stamps in with -ldflags.
func TestVersionMatchesWailsJSON(t *testing.T) {
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
	if project.Info.ProductVersion == "" || version != project.Info.ProductVersion {
		t.Fatalf("version = %q, wails.json info.productVersion = %q: keep them equal", version, project.Info.ProductVersion)
	}
}

// TestMain lets tests run the real command line in a fresh process: the
// test binary re-executed with suzuranMainEnv set runs main instead of the
// tests. A fresh process matters because cobra commands keep their parsed
// flags, and register's subcommands are shared by every root.
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

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, stderr, err := execute(t, args...)
		if err != nil {
			t.Fatalf("suzuran %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		if out != "suzuran "+version+"\n" {
			t.Errorf("suzuran %s printed %q, want %q", strings.Join(args, " "), out, "suzuran "+version+"\n")
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

// Subcommands registered by other files appear under the root command.
func TestRegisteredCommandsAreAdded(t *testing.T) {
	root := newRootCmd()
	if len(commands) == 0 {
		t.Fatal("no subcommand registered; cmd_version.go registers one")
	}
	for _, c := range commands {
		found, _, err := root.Find([]string{c.Name()})
		if err != nil || found != c {
			t.Errorf("subcommand %s is not reachable from the root command: %v", c.Name(), err)
		}
	}
}
