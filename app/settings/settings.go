// Package settings is the one reader and writer of settings.json, the
// user's settings file: a JSON object of top-level keys, read by the
// command line ("model"), the window's Settings view and the model
// picker, each keeping its own keys and leaving every other key as it was.
// Writes are atomic (a temporary file beside it, synced, renamed over it),
// so that a crash leaves the old file or the new one, never part of them;
// a file that is not a JSON object is reported and left alone.
package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/suzuran-app/suzuran/app/internal/atomicfile"
)

// Path is settings.json in the user's config folder
// (~/Library/Application Support/suzuran on macOS, $XDG_CONFIG_HOME/suzuran
// or ~/.config/suzuran on Linux).
func Path() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no user config folder for settings.json: %w", err)
	}
	return filepath.Join(base, "suzuran", "settings.json"), nil
}

// Read returns the keys of the file at path; an absent file has none.
func Read(path string) (map[string]json.RawMessage, error) {
	raw := map[string]json.RawMessage{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return raw, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading settings: %w", err)
	}
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("%s is not a JSON object (%v): fix it or move it away", path, err)
	}
	return raw, nil
}

// Model returns the "model" key of the file at path: the model folder the
// user chose, "" when the file or the key is absent.
func Model(path string) (string, error) {
	raw, err := Read(path)
	if err != nil {
		return "", err
	}
	var model string
	if v, ok := raw["model"]; ok {
		if err := json.Unmarshal(v, &model); err != nil {
			return "", fmt.Errorf("%s: \"model\" is not a string (%s): write the model folder's path, or remove the key", path, v)
		}
	}
	return model, nil
}

// SetModel sets the "model" key of the file at path to dir.
func SetModel(path, dir string) error {
	v, err := json.Marshal(dir)
	if err != nil {
		return err
	}
	return Update(path, map[string]json.RawMessage{"model": v})
}

// Update merges fields into the file at path, keeping its other keys, and
// writes it atomically, creating it (and its folder) when absent. The file
// may hold the API's key: a new one is the user's alone (0600), an
// existing one keeps its permissions.
func Update(path string, fields map[string]json.RawMessage) error {
	raw, err := Read(path)
	if err != nil {
		return err
	}
	for k, v := range fields {
		raw[k] = v
	}
	data, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return err
	}
	perm := fs.FileMode(0o600)
	if st, err := os.Stat(path); err == nil {
		perm = st.Mode().Perm()
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return atomicfile.Write(path, append(data, '\n'), perm)
}
