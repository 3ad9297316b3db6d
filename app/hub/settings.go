package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// SaveModelSetting sets the "model" key of the settings file at path to dir,
// keeping every other key as it was, and replaces the file atomically (a
// temporary file renamed over it), so that a crash leaves the old settings
// or the new, never half of them. A file that is not a JSON object is left
// alone and reported.
func SaveModelSetting(path, dir string) error {
	settings := map[string]json.RawMessage{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading settings %s: %w", path, err)
	default:
		if err := json.Unmarshal(data, &settings); err != nil || settings == nil {
			return fmt.Errorf("%s is not a JSON object (%v); fix or remove it, then choose the model again", path, err)
		}
	}
	value, err := json.Marshal(dir)
	if err != nil {
		return err
	}
	settings["model"] = value
	out, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		perm = st.Mode().Perm() // a file the user made private stays so
	}
	return writeFileAtomic(path, append(out, '\n'), perm)
}
