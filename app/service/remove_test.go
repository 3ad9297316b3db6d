package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/app/modelhost"
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
	waitModel(t, ts.Service, modelhost.StateReady)

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
	if m := waitModel(t, ts.Service, modelhost.StateReady); !m.Demo {
		t.Errorf("after removing the current model the model is %+v, want the demo", m)
	}
}

// TestRemoveModelDeletesAnLMStudioFolder: a model in LM Studio's folder is
// removed as its own folder, the space freed being its files; one whose
// folder holds another folder is not offered, and RemoveModel refuses it.
func TestRemoveModelDeletesAnLMStudioFolder(t *testing.T) {
	withHub(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	copyModel := func(dir string) int64 {
		var n int64
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files, _ := os.ReadDir(tinyMLX)
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(tinyMLX, f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, f.Name()), data, 0o644)
			n += int64(len(data))
		}
		return n
	}
	root := filepath.Join(home, ".lmstudio", "models", "test-org")
	plain := filepath.Join(root, "tiny")
	bytes := copyModel(plain)
	mixed := filepath.Join(root, "mixed")
	copyModel(mixed)
	os.MkdirAll(filepath.Join(mixed, "notes"), 0o755)
	ts := newTestService(t, demoModel(t))

	choices, err := ts.ui.Models()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]ModelChoice{}
	for _, c := range choices {
		found[c.Dir] = c
	}
	if c := found[plain]; !c.Removable || c.Frees != bytes || c.Source != "LM Studio" {
		t.Errorf("%s listed as %+v, want removable freeing %d bytes", plain, c, bytes)
	}
	if c, ok := found[mixed]; !ok || c.Removable {
		t.Errorf("%s listed as %+v (%v), want listed, not removable", mixed, c, ok)
	}
	if _, err := ts.ui.RemoveModel(mixed); err == nil || !strings.Contains(err.Error(), "notes") {
		t.Errorf("removing a folder holding a folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mixed, "config.json")); err != nil {
		t.Errorf("the refused folder lost its files: %v", err)
	}
	got, err := ts.ui.RemoveModel(plain)
	if err != nil {
		t.Fatal(err)
	}
	if got.Dir != plain || got.Freed != bytes {
		t.Errorf("removed %+v, want %s freeing %d", got, plain, bytes)
	}
	if _, err := os.Lstat(plain); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", plain, err)
	}
	if m := ts.ModelState(); !m.Demo {
		t.Errorf("removing a model not in use changed the model: %+v", m)
	}
}
