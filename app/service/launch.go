package service

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// launchAgentLabel names the LaunchAgent on macOS.
const launchAgentLabel = "app.suzuran.Suzuran"

// launchEntry is the file that starts the app at login: a LaunchAgent
// property list on macOS (launchd reads ~/Library/LaunchAgents at login),
// an XDG autostart entry on Linux.
func launchEntry() (path, content string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("finding the app to start at login: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", "", err
	}
	if runtime.GOOS == "darwin" {
		path = filepath.Join(home, "Library", "LaunchAgents", launchAgentLabel+".plist")
		content = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key><string>` + launchAgentLabel + `</string>
	<key>ProgramArguments</key><array><string>` + xmlEscape(exe) + `</string></array>
	<key>RunAtLoad</key><true/>
	<key>ProcessType</key><string>Interactive</string>
</dict>
</plist>
`
		return path, content, nil
	}
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" || !filepath.IsAbs(base) {
		base = filepath.Join(home, ".config")
	}
	path = filepath.Join(base, "autostart", "suzuran.desktop")
	content = "[Desktop Entry]\nType=Application\nName=Suzuran\nComment=Local chat with Qwen3.6-35B-A3B\n" +
		"Exec=" + desktopExecQuote(exe) + "\nTerminal=false\nX-GNOME-Autostart-enabled=true\n"
	return path, content, nil
}

// setLaunchAtLogin writes or removes the login entry.
func setLaunchAtLogin(on bool) error {
	path, content, err := launchEntry()
	if err != nil {
		return err
	}
	if !on {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", path, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// desktopExecQuote quotes a path for an Exec= line (the Desktop Entry
// specification's quoting: double quotes, with \ " ` $ escaped).
func desktopExecQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`", "$", `\$`).Replace(s) + `"`
}
