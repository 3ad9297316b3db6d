package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"
)

func TestLogDir(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		name string
		goos string
		env  map[string]string
		want string
	}{
		{"macOS", "darwin", map[string]string{"XDG_STATE_HOME": "/elsewhere"}, "/Users/ann/Library/Logs/Suzuran"},
		{"Linux with XDG_STATE_HOME", "linux", map[string]string{"XDG_STATE_HOME": "/var/state"}, "/var/state/suzuran"},
		{"Linux default", "linux", nil, "/Users/ann/.local/state/suzuran"},
		{"relative XDG_STATE_HOME is ignored", "linux", map[string]string{"XDG_STATE_HOME": "state"}, "/Users/ann/.local/state/suzuran"},
	} {
		if got := logDir(tc.goos, env(tc.env), "/Users/ann"); got != tc.want {
			t.Errorf("%s: logDir = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// Without a terminal, the desktop app logs to its file only, as JSON lines
// at or above the chosen level, and the global logger other packages use
// writes there too.
func TestLoggingToFile(t *testing.T) {
	defer func(l zerolog.Logger) { log.Logger = l }(log.Logger)
	dir := filepath.Join(t.TempDir(), "logs")
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()

	logger, closer, err := setupLogging(logOptions{level: zerolog.InfoLevel, toFile: true, dir: dir, stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	logger.Debug().Msg("below the level")
	logger.Info().Str("part", "test").Msg("first")
	log.Warn().Msg("from the global logger")
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(filepath.Join(dir, logFileName))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("log file has %d lines, want 2:\n%s", len(lines), data)
	}
	for i, want := range []string{"first", "from the global logger"} {
		var event map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &event); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+1, err)
		}
		if event["message"] != want || event["time"] == nil {
			t.Errorf("line %d = %v, want message %q with a time", i+1, event, want)
		}
	}
	if info, _ := os.Stat(dir); info.Mode().Perm() != 0o700 {
		t.Errorf("log folder mode %v, want 0700: logs may hold prompts", info.Mode().Perm())
	}
	if written, _ := os.ReadFile(stderr.Name()); len(written) != 0 {
		t.Errorf("the desktop app wrote %q to a stderr that is not a terminal", written)
	}
}

// A command whose stderr is not a terminal logs JSON lines there.
func TestLoggingToPipe(t *testing.T) {
	defer func(l zerolog.Logger) { log.Logger = l }(log.Logger)
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	logger, closer, err := setupLogging(logOptions{level: zerolog.DebugLevel, stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	logger.Debug().Int("n", 3).Msg("hello")
	_ = closer.Close()
	written, _ := os.ReadFile(stderr.Name())
	if !bytes.Contains(written, []byte(`"message":"hello"`)) || !bytes.Contains(written, []byte(`"n":3`)) {
		t.Errorf("stderr got %q, want a JSON line with the message and field", written)
	}
}

// The file rotates: lumberjack's size cap is what bounds it, so check it
// is set as documented.
func TestLogFileIsCapped(t *testing.T) {
	defer func(l zerolog.Logger) { log.Logger = l }(log.Logger)
	dir := t.TempDir()
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	_, closer, err := setupLogging(logOptions{level: zerolog.InfoLevel, toFile: true, dir: dir, stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	lj, ok := closer.(interface{ Rotate() error })
	if !ok {
		t.Fatalf("the log file closer is %T, not a rotating logger", closer)
	}
	log.Info().Msg("before rotation")
	if err := lj.Rotate(); err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("after rotation")
	// lumberjack compresses the backup on a goroutine of its own; wait for
	// it, which also shows that backups are compressed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) == 2 && slices.Contains(names, logFileName) &&
			slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".log.gz") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Rotate the log folder holds %v, want %s and one compressed backup", names, logFileName)
		}
		time.Sleep(20 * time.Millisecond) // the rotation compresses in the background, with no event: the folder is read again
	}
	if logFileMaxMB*(logFileBackups+1) > 50 {
		t.Errorf("logs may take %d MB; keep them small", logFileMaxMB*(logFileBackups+1))
	}
}
