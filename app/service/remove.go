package service

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/suzuran-app/suzuran/app/hub"
	"github.com/suzuran-app/suzuran/app/modelhost"
)

// RemovedModel is what RemoveModel deleted.
type RemovedModel struct {
	Name string `json:"name"`
	// Dir is the folder removed: the repository's models--<org>--<name>
	// folder in the Hugging Face cache (every revision and its files), or
	// the model's own folder elsewhere.
	Dir string `json:"dir"`
	// Freed is the bytes the removed files held on disk.
	Freed int64 `json:"freed"`
}

// removalDir is the folder that deleting the listed model c removes, or
// why it may not be removed. Only models that Models lists can be removed:
// never the demo, and never a folder that is not a model.
func removalDir(c ModelChoice) (string, error) {
	if c.Demo || modelhost.IsDemo(c.Dir) {
		return "", errors.New("the demo model is part of Suzuran and cannot be removed")
	}
	switch c.Source {
	case hub.SourceHFCache:
		// <cache>/models--<org>--<name>/snapshots/<commit>
		snapshots := filepath.Dir(filepath.Clean(c.Dir))
		repo := filepath.Dir(snapshots)
		if filepath.Base(snapshots) != "snapshots" || !strings.HasPrefix(filepath.Base(repo), "models--") {
			return "", fmt.Errorf("%s is not a snapshot of the Hugging Face cache; remove it in Finder", c.Dir)
		}
		return repo, nil
	default:
		if !c.Valid {
			return "", fmt.Errorf("%s is not a model folder Suzuran can use (%s); remove it in Finder if you want it gone", c.Dir, c.Problem)
		}
		// A model's own folder holds its files only; one with folders in
		// it holds more than the model.
		entries, err := os.ReadDir(c.Dir)
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", c.Dir, err)
		}
		for _, e := range entries {
			if e.IsDir() {
				return "", fmt.Errorf("%s holds the folder %s besides the model's files; remove the model in Finder", c.Dir, e.Name())
			}
		}
		return filepath.Clean(c.Dir), nil
	}
}

// diskBytes adds up the sizes of the regular files under dir, links not
// followed: what deleting dir gives back (the cache's snapshots are links
// to its blobs, which are counted once).
func diskBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// RemoveModel deletes the downloaded model in dir (a folder from Models)
// from the disk, and returns what it freed. The current model is first
// switched to the demo. The demo model, and folders Models does not list
// as a model, are refused and nothing is deleted.
func (u *UI) RemoveModel(dir string) (RemovedModel, error) {
	choices, err := u.Models()
	if err != nil {
		return RemovedModel{}, err
	}
	var c *ModelChoice
	for i := range choices {
		if sameDir(choices[i].Dir, dir) {
			c = &choices[i]
			break
		}
	}
	if c == nil {
		return RemovedModel{}, fmt.Errorf("%s is not one of the models Suzuran lists; nothing was removed", dir)
	}
	target, err := removalDir(*c)
	if err != nil {
		return RemovedModel{}, err
	}
	if c.Current {
		if _, err := u.UseModel(""); err != nil {
			return RemovedModel{}, fmt.Errorf("switching to the demo model before removing %s: %w", c.Name, err)
		}
	}
	freed := diskBytes(target)
	if err := os.RemoveAll(target); err != nil {
		return RemovedModel{Name: c.Name, Dir: target, Freed: freed - diskBytes(target)},
			fmt.Errorf("removing %s: %w (check its permissions, or remove it in Finder)", target, err)
	}
	return RemovedModel{Name: c.Name, Dir: target, Freed: freed}, nil
}
