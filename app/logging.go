package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"
	"gopkg.in/natefinch/lumberjack.v2"
)

// Log file limits: a menu-bar app runs for weeks, so the file rotates at
// logFileMaxMB and keeps logFileBackups old files (compressed), at most
// about 20 MB on disk in all.
const (
	logFileName    = "suzuran.log"
	logFileMaxMB   = 10
	logFileBackups = 3
	logFileMaxDays = 30
)

// logDir is where the desktop app writes its log: the folder Console.app
// reads on macOS, the XDG state folder elsewhere. getenv and home are
// parameters so that tests can check each platform's rule.
func logDir(goos string, getenv func(string) string, home string) string {
	if goos == "darwin" {
		return filepath.Join(home, "Library", "Logs", "Suzuran")
	}
	if state := getenv("XDG_STATE_HOME"); filepath.IsAbs(state) {
		// The XDG spec says to ignore relative paths.
		return filepath.Join(state, "suzuran")
	}
	return filepath.Join(home, ".local", "state", "suzuran")
}

// logOptions says where the log goes.
type logOptions struct {
	level zerolog.Level
	// toFile adds the rotating log file, which the desktop app always has:
	// launched from Finder or the Dock it has no terminal to write to.
	toFile bool
	// dir overrides logDir's choice (tests).
	dir string
	// stderr is where console output goes; its being a terminal chooses
	// between the human-readable console format and JSON lines.
	stderr *os.File
}

// setupLogging builds the process logger, installs it as zerolog's global
// logger (github.com/rs/zerolog/log) for every package, and returns a closer
// for the log file (a no-op without one).
func setupLogging(opts logOptions) (zerolog.Logger, io.Closer, error) {
	var writers []io.Writer
	var closer io.Closer = nopCloser{}

	stderr := opts.stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	if isatty.IsTerminal(stderr.Fd()) || isatty.IsCygwinTerminal(stderr.Fd()) {
		writers = append(writers, zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.TimeOnly})
	} else if !opts.toFile {
		// A command whose output is piped or captured (CI, scripts) gets
		// JSON lines, one event a line, for tools to read.
		writers = append(writers, stderr)
	}

	var file *lumberjack.Logger
	if opts.toFile {
		dir := opts.dir
		if dir == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return zerolog.Logger{}, nil, fmt.Errorf("finding the log folder: %w", err)
			}
			dir = logDir(runtime.GOOS, os.Getenv, home)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return zerolog.Logger{}, nil, fmt.Errorf("creating the log folder %s: %w (check its permissions or free space)", dir, err)
		}
		file = &lumberjack.Logger{
			Filename:   filepath.Join(dir, logFileName),
			MaxSize:    logFileMaxMB,
			MaxBackups: logFileBackups,
			MaxAge:     logFileMaxDays,
			Compress:   true,
		}
		// Open now, so that an unwritable file is reported at start and
		// not lost at the first log line.
		if _, err := file.Write(nil); err != nil {
			return zerolog.Logger{}, nil, fmt.Errorf("opening the log file %s: %w (check its permissions or free space)", file.Filename, err)
		}
		writers = append(writers, file)
		closer = file
	}

	logger := zerolog.New(zerolog.MultiLevelWriter(writers...)).Level(opts.level).With().Timestamp().Logger()
	log.Logger = logger
	zerolog.DefaultContextLogger = &log.Logger
	return logger, closer, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
