package service

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestLaunchAtLogin(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	path, _, err := launchEntry()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(home, "config", "autostart", "suzuran.desktop")
	if runtime.GOOS == "darwin" {
		want = filepath.Join(home, "Library", "LaunchAgents", launchAgentLabel+".plist")
	}
	if path != want {
		t.Fatalf("login entry at %s, want %s", path, want)
	}
	if err := setLaunchAtLogin(true); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if !strings.Contains(string(data), exe) {
		t.Errorf("login entry does not start %s:\n%s", exe, data)
	}
	if err := setLaunchAtLogin(false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("login entry still there after switching it off: %v", err)
	}
	if err := setLaunchAtLogin(false); err != nil {
		t.Errorf("switching off twice: %v", err)
	}
}

func TestDesktopExecQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/usr/bin/suzuran", `"/usr/bin/suzuran"`},
		{`/opt/my "apps"/$x`, `"/opt/my \"apps\"/\$x"`},
	}
	for _, c := range cases {
		if got := desktopExecQuote(c.in); got != c.want {
			t.Errorf("desktopExecQuote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
