package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/app/server"
)

// cacheModel lays the tiny model out in a Hugging Face cache under root as
// the hub client does: the files in blobs/, a snapshot of links to them.
func cacheModel(t *testing.T, root, repo string) (snapshot string, bytes int64) {
	t.Helper()
	folder := filepath.Join(root, "models--"+strings.ReplaceAll(repo, "/", "--"))
	snapshot = filepath.Join(folder, "snapshots", "0123456789abcdef0123456789abcdef01234567")
	for _, d := range []string{filepath.Join(folder, "blobs"), snapshot, filepath.Join(folder, "refs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(folder, "refs", "main"), []byte(filepath.Base(snapshot)), 0o644)
	bytes = int64(len(filepath.Base(snapshot)))
	files, err := os.ReadDir(tinyMLX)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		data, err := os.ReadFile(filepath.Join(tinyMLX, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		blob := filepath.Join(folder, "blobs", strings.Repeat(string(rune('a'+i)), 40))
		if err := os.WriteFile(blob, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", filepath.Base(blob)), filepath.Join(snapshot, f.Name())); err != nil {
			t.Fatal(err)
		}
		bytes += int64(len(data))
	}
	return snapshot, bytes
}

// TestRemoveModelDeletesTheCacheFolder: a model in the Hugging Face cache,
// in use, is removed from Settings: the app switches to the demo, the
// repository's whole folder (blobs included) is gone, and the space it
// says it freed is what the files held. The demo, a folder that is not a
// listed model and the cache itself are refused, and stay.
func TestRemoveModelDeletesTheCacheFolder(t *testing.T) {
	_, cache := withHub(t)
	snapshot, bytes := cacheModel(t, cache, tinyRepo)
	other, _ := cacheModel(t, cache, "test-org/kept")
	ts := newTestService(t, snapshot)
	waitModel(t, ts.Service, server.StateReady)

	choices, err := ts.ui.Models()
	if err != nil {
		t.Fatal(err)
	}
	var listed *ModelChoice
	for i := range choices {
		if choices[i].Demo && choices[i].Removable {
			t.Errorf("the demo is offered for removal: %+v", choices[i])
		}
		if sameDir(choices[i].Dir, snapshot) {
			listed = &choices[i]
		}
	}
	if listed == nil || !listed.Removable || listed.Frees != bytes || !listed.Current {
		t.Fatalf("listed %+v, want the current model, removable, freeing %d bytes", listed, bytes)
	}

	for _, dir := range []string{"", choices[0].Dir, cache, filepath.Dir(snapshot), t.TempDir()} {
		if _, err := ts.ui.RemoveModel(dir); err == nil {
			t.Errorf("RemoveModel(%q) was allowed", dir)
		}
	}
	if _, err := os.Stat(filepath.Join(snapshot, "config.json")); err != nil {
		t.Fatalf("a refused removal touched the model: %v", err)
	}

	got, err := ts.ui.RemoveModel(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Dir(filepath.Dir(snapshot))
	if got.Dir != repo || got.Freed != bytes || got.Name != tinyRepo {
		t.Errorf("removed %+v, want %s freeing %d bytes", got, repo, bytes)
	}
	if _, err := os.Lstat(repo); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", repo, err)
	}
	if _, err := os.Stat(filepath.Join(other, "config.json")); err != nil {
		t.Errorf("the other cached model went too: %v", err)
	}
	if m := waitModel(t, ts.Service, server.StateReady); !m.Demo {
		t.Errorf("after removing the current model the model is %+v, want the demo", m)
	}
}
