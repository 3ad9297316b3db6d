package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/app/settings"
	"github.com/suzuran-app/suzuran/assets/models"
)

// Which model a command runs, for every command that takes --model:
//
//  1. the --model flag, when given;
//  2. else the "model" key of the settings file, settings.json in the
//     user's config folder (~/Library/Application Support/suzuran on macOS,
//     $XDG_CONFIG_HOME/suzuran or ~/.config/suzuran on Linux), a JSON object
//     such as {"model": "/Users/me/models/Qwen3.6-35B-A3B-4bit"};
//  3. else the demo model Suzuran Tiny, installed from the binary into the
//     user's cache folder on first use (assets/models), with a note saying
//     so.
//
// Whichever it is, the result is a plain model folder and the engine loads
// it the same way.

// demoNote is what a command prints to stderr when it falls back to the
// demo model.
const demoNote = "using the demo model " + models.DemoName +
	" (8 MB, it knows only short answers about Python's standard library); " +
	"for Qwen3.6-35B-A3B, run `suzuran pull` (it downloads mlx-community/Qwen3.6-35B-A3B-4bit), " +
	`pass --model DIR, or set "model" in %s`

// demoShortNote is what a command prints instead of demoNote once the
// full note was shown on this machine.
const demoShortNote = "using the demo model " + models.DemoName + "; `suzuran pull` downloads the real one"

// demoNoteMarker is the file, in the user cache folder, whose presence
// says the full demo note was shown on this machine.
const demoNoteMarker = "demo-note-shown"

// demoNoteOnce returns note the first time a command on this machine falls
// back to the demo model, and demoShortNote after that: the marker file in
// the user cache folder remembers it. Without a cache folder it stays
// the full note, which loses nothing.
func demoNoteOnce(note string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		return note
	}
	marker := filepath.Join(base, "suzuran", demoNoteMarker)
	if _, err := os.Stat(marker); err == nil {
		return demoShortNote
	}
	if os.MkdirAll(filepath.Dir(marker), 0o755) == nil {
		_ = os.WriteFile(marker, []byte("The full note about the demo model was shown; commands now print one short line.\n"), 0o644)
	}
	return note
}

// configuredModel returns the "model" key of the settings file, "" when the
// file or the key is absent.
func configuredModel() (string, error) {
	path, err := settings.Path()
	if err != nil {
		return "", nil // no config folder: nothing configured
	}
	return settings.Model(path)
}

// resolveModel picks the model folder a command runs: flag when given, else
// the configured model, else the demo model. note is non-empty when the demo
// model was chosen; callers print it to stderr.
func resolveModel(flag string) (dir string, note string, err error) {
	if flag != "" {
		return checkModelDir(flag, "--model")
	}
	configured, err := configuredModel()
	if err != nil {
		return "", "", err
	}
	if configured != "" {
		path, _ := settings.Path()
		return checkModelDir(configured, fmt.Sprintf("the \"model\" setting in %s", path))
	}
	root, err := models.DefaultRoot()
	if err != nil {
		return "", "", err
	}
	dir, err = models.Install(root)
	if err != nil {
		return "", "", err
	}
	path, perr := settings.Path()
	if perr != nil {
		path = "settings.json"
	}
	return dir, fmt.Sprintf(demoNote, path), nil
}

// commandModel resolves a command's --model flag and prints the demo note,
// when there is one, to the command's stderr: the one call every command
// with --model makes.
func commandModel(cmd *cobra.Command, flag string) (string, error) {
	dir, note, err := resolveModel(flag)
	if err != nil {
		return "", err
	}
	if note != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), demoNoteOnce(note))
	}
	return dir, nil
}

// checkModelDir checks that a model folder named by source exists.
func checkModelDir(dir, source string) (string, string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", "", fmt.Errorf("model folder %s (from %s): %w", dir, source, err)
	}
	if !st.IsDir() {
		return "", "", fmt.Errorf("model folder %s (from %s) is a file; pass the folder that holds the model's files", dir, source)
	}
	// What the folder must hold depends on the command (tokenize needs only
	// tokenizer.json); the loaders name any missing file.
	return dir, "", nil
}
