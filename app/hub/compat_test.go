package hub

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/app/internal/fakehub"
)

// These tests hold the cache layout to Hugging Face's own client: its
// JavaScript library (@huggingface/hub, which writes the same cache as
// huggingface_hub in Python), run with Node on the same cache folder.

var nodeSetup sync.Once

// hfClient runs testdata/node/cache.mjs with a command and its parameters
// and decodes its JSON answer; the first call installs the library with
// npm ci.
func hfClient(t *testing.T, command string, params, result any) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: the cache compatibility tests need Node.js 18+ and npm (https://nodejs.org)")
	}
	var setupErr error
	var setupOut []byte
	nodeSetup.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@huggingface", "hub", "package.json")); err == nil {
			return
		}
		setupOut, setupErr = exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefix", dir).CombinedOutput()
	})
	if setupErr != nil {
		t.Fatalf("npm ci in app/hub/testdata/node failed (is the npm registry reachable?): %v\n%s", setupErr, setupOut)
	}
	raw, _ := json.Marshal(params)
	cmd := exec.Command("node", filepath.Join(dir, "cache.mjs"), command, string(raw))
	cmd.Env = append(os.Environ(), "HF_TOKEN=", "HF_HUB_OFFLINE=")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("@huggingface/hub %s: %v\n%s", command, err, stderr)
	}
	if err := json.Unmarshal(out, result); err != nil {
		t.Fatalf("@huggingface/hub %s printed %q: %v", command, out, err)
	}
}

type hfDownload struct {
	Snapshot string `json:"snapshot"`
}

func TestCacheWrittenByHFClientIsReused(t *testing.T) {
	h, _ := newHub(t)
	c := newClient(t, h)
	var theirs hfDownload
	hfClient(t, "download", map[string]string{"hubUrl": h.URL, "repo": testRepo, "revision": "main", "cacheDir": c.CacheDir}, &theirs)
	if h.CDNRequests("model.safetensors") == 0 {
		t.Fatalf("@huggingface/hub did not download the weights from the fake hub (%d CDN requests)", h.CDNRequests("model.safetensors"))
	}
	h.ResetCounts()
	s, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir != theirs.Snapshot || s.Fetched != 0 {
		t.Errorf("Pull gave %s after fetching %d bytes; want @huggingface/hub's %s and nothing fetched", s.Dir, s.Fetched, theirs.Snapshot)
	}
	if n := h.FileRequests(); n != 0 {
		t.Errorf("%d requests for files @huggingface/hub had downloaded, want 0", n)
	}
	if err := Validate(s.Dir); err != nil {
		t.Fatal(err)
	}
}

func TestCacheWrittenByPullIsReusedByHFClient(t *testing.T) {
	// Only the model's files go into our snapshot and the client fetches
	// every file listed, so this repository holds no README or
	// .gitattributes.
	h := fakehub.New(t)
	repo := h.Add(testRepo, fixtureFiles(t))
	c := newClient(t, h)
	ours, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.ResetCounts()
	var scan struct {
		Repos []struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			Files     int    `json:"files"`
			Revisions []struct {
				Commit string   `json:"commit"`
				Refs   []string `json:"refs"`
				Files  []struct {
					Path string `json:"path"`
					Blob string `json:"blob"`
					Size int64  `json:"size"`
				} `json:"files"`
			} `json:"revisions"`
		} `json:"repos"`
		Warnings []string `json:"warnings"`
	}
	hfClient(t, "scan", map[string]string{"cacheDir": c.CacheDir}, &scan)
	if len(scan.Warnings) != 0 || len(scan.Repos) != 1 {
		t.Fatalf("scanCacheDir: %+v", scan)
	}
	r := scan.Repos[0]
	if r.ID != testRepo || r.Type != "model" || r.Files != 6 || len(r.Revisions) != 1 {
		t.Fatalf("scanCacheDir sees %+v; want %s, a model with 6 files in one revision", r, testRepo)
	}
	rev := r.Revisions[0]
	if rev.Commit != repo.Commit || len(rev.Refs) != 1 || rev.Refs[0] != "main" {
		t.Errorf("revision %s refs %v, want %s [main]", rev.Commit, rev.Refs, repo.Commit)
	}
	sort.Slice(rev.Files, func(i, j int) bool { return rev.Files[i].Path < rev.Files[j].Path })
	for _, f := range rev.Files {
		name := filepath.Base(f.Path)
		want := repo.Files[name]
		if want == nil || f.Size != int64(len(want.Data)) || filepath.Base(f.Blob) != (File{GitID: want.GitID, SHA256: lfsID(want)}).Blob() {
			t.Errorf("scanCacheDir file %+v does not match the repository's %s", f, name)
		}
	}

	var theirs hfDownload
	hfClient(t, "download", map[string]string{"hubUrl": h.URL, "repo": testRepo, "revision": "main", "cacheDir": c.CacheDir}, &theirs)
	if theirs.Snapshot != ours.Dir {
		t.Errorf("snapshotDownload gave %s, want our %s", theirs.Snapshot, ours.Dir)
	}
	if n := h.FileRequests(); n != 0 {
		t.Errorf("snapshotDownload made %d requests for files Pull had downloaded, want 0", n)
	}
}

// fixtureFiles are the fixture model's files by name.
func fixtureFiles(t *testing.T) map[string][]byte {
	files := map[string][]byte{}
	entries, err := os.ReadDir(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		files[e.Name()] = fixtureBytes(t, e.Name())
	}
	return files
}

func lfsID(f *fakehub.File) string {
	if f.LFS {
		return f.SHA256
	}
	return ""
}
