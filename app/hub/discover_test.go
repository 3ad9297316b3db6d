package hub

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
)

// copyFixture copies the fixture model into dir, leaving out the files in
// skip.
func copyFixture(t *testing.T, dir string, skip ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(fixture)
outer:
	for _, e := range entries {
		for _, s := range skip {
			if e.Name() == s {
				continue outer
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), fixtureBytes(t, e.Name()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDiscover(t *testing.T) {
	h, repo := newHub(t)
	c := newClient(t, h)
	snap := hfCacheCopy(t, c.CacheDir, repo)
	// A repository of another model, as mlx-lm would leave it in the cache.
	other := filepath.Join(c.CacheDir, "models--mlx-community--Llama-3.2-1B-4bit", "snapshots", strings.Repeat("a", 40))
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "config.json"), []byte(`{"model_type":"llama"}`), 0o644)
	// A cache entry without a config (a dataset, a half-started download)
	// is not a model and is not listed.
	os.MkdirAll(filepath.Join(c.CacheDir, "models--someone--empty", "snapshots", strings.Repeat("b", 40)), 0o755)

	lmNew, lmOld := filepath.Join(t.TempDir(), ".lmstudio", "models"), filepath.Join(t.TempDir(), "lm-studio", "models")
	copyFixture(t, filepath.Join(lmNew, "lmstudio-community", "Qwen3.6-tiny-MLX-4bit"))
	copyFixture(t, filepath.Join(lmOld, "mlx-community", "Qwen3.6-tiny-no-weights"), "model.safetensors")

	found, err := Discover(Places{HFCache: c.CacheDir, LMStudio: []string{lmNew, lmOld, filepath.Join(t.TempDir(), "absent")}})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name, dir, source string
		err               error
	}
	want := []row{
		{"lmstudio-community/Qwen3.6-tiny-MLX-4bit", filepath.Join(lmNew, "lmstudio-community", "Qwen3.6-tiny-MLX-4bit"), SourceLMStudio, nil},
		{testRepo, snap, SourceHFCache, nil},
		{"mlx-community/Llama-3.2-1B-4bit", other, SourceHFCache, checkpoint.ErrArchitecture},
		{"mlx-community/Qwen3.6-tiny-no-weights", filepath.Join(lmOld, "mlx-community", "Qwen3.6-tiny-no-weights"), SourceLMStudio, checkpoint.ErrMissing},
	}
	if len(found) != len(want) {
		t.Fatalf("found %d models, want %d: %+v", len(found), len(want), found)
	}
	for i, w := range want {
		f := found[i]
		if f.Name != w.name || f.Dir != w.dir || f.Source != w.source {
			t.Errorf("model %d: %s in %s (%s), want %s in %s (%s)", i, f.Name, f.Dir, f.Source, w.name, w.dir, w.source)
		}
		if (w.err == nil) != f.Valid() || (w.err != nil && !errors.Is(f.Err, w.err)) {
			t.Errorf("%s: err %v, want %v", f.Name, f.Err, w.err)
		}
		if f.Valid() && f.Size < 1_334_192 {
			t.Errorf("%s: size %d, want the fixture's", f.Name, f.Size)
		}
	}
	if found[1].Commit != repo.Commit || len(found[1].Refs) != 1 || found[1].Refs[0] != "main" {
		t.Errorf("cache snapshot commit %s refs %v, want %s [main]", found[1].Commit, found[1].Refs, repo.Commit)
	}
}

func TestInspectNamesTheBrokenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "Qwen")
	copyFixture(t, dir)
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{not json"), 0o644)
	f := Inspect(dir)
	if f.Valid() || !strings.Contains(f.Err.Error(), "tokenizer.json") {
		t.Fatalf("Inspect = %v, want an error naming tokenizer.json", f.Err)
	}
	copyFixture(t, dir)
	if f := Inspect(dir); !f.Valid() || f.Source != SourceFolder || f.Name != "Qwen" {
		t.Fatalf("Inspect after the repair = %+v", f)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestPlan(t *testing.T) {
	h, repo := newHub(t)
	c := newClient(t, h)
	plan, err := c.Plan(context.Background(), testRepo, "")
	if err != nil {
		t.Fatal(err)
	}
	size := int64(0)
	for name, f := range repo.Files {
		if wanted(name) {
			size += int64(len(f.Data))
		}
	}
	weights := int64(len(repo.Files["model.safetensors"].Data))
	if plan.Cached || plan.Size != size || plan.ToDownload != size || plan.ModelBytes != weights || plan.Commit != repo.Commit {
		t.Errorf("plan %+v: want %d bytes to download, %d of weights, commit %s", plan, size, weights, repo.Commit)
	}
	if len(plan.Machine.Findings) == 0 || !plan.Machine.CanRun() {
		t.Errorf("machine check %+v", plan.Machine.Findings)
	}
	if h.FileRequests() != 0 {
		t.Error("Plan fetched files")
	}
	if _, err := c.Download(context.Background(), plan.Listing, nil); err != nil {
		t.Fatal(err)
	}
	plan, err = c.Plan(context.Background(), testRepo, "")
	if err != nil || !plan.Cached || plan.ToDownload != 0 {
		t.Fatalf("plan after the download %+v, %v: want cached", plan, err)
	}
	c.Offline = true
	plan, err = c.Plan(context.Background(), testRepo, "")
	if err != nil || !plan.Cached || plan.Listing != nil || plan.ModelBytes != weights {
		t.Fatalf("offline plan %+v, %v: want the cached copy", plan, err)
	}
}

func TestUseModel(t *testing.T) {
	settings := filepath.Join(t.TempDir(), "settings.json")
	os.WriteFile(settings, []byte(`{"theme":"dark"}`), 0o644)
	broken := filepath.Join(t.TempDir(), "broken")
	copyFixture(t, broken, "config.json")
	if _, err := UseModel(settings, broken); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("UseModel of a folder without config.json: %v", err)
	}
	if data, _ := os.ReadFile(settings); string(data) != `{"theme":"dark"}` {
		t.Fatalf("a refused folder changed the settings to %s", data)
	}
	h, repo := newHub(t)
	c := newClient(t, h)
	snap := hfCacheCopy(t, c.CacheDir, repo)
	f, err := UseModel(settings, snap)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != testRepo || f.Source != SourceHFCache || f.Commit != repo.Commit {
		t.Errorf("UseModel of a cache snapshot gave %+v; want it named as its repository", f)
	}
	data, _ := os.ReadFile(settings)
	if want := `"model": "` + snap + `"`; !strings.Contains(string(data), want) || !strings.Contains(string(data), `"theme": "dark"`) {
		t.Errorf("settings %s, want %s and the theme kept", data, want)
	}
}

func TestJSONForTheUI(t *testing.T) {
	found := []Found{
		{Name: "a/b", Dir: "/m", Source: SourceLMStudio, Size: 5},
		{Name: "c/d", Dir: "/n", Source: SourceHFCache, Err: errors.New("config.json: missing")},
	}
	p := Progress{Repo: "a/b", Done: 1, Total: 2, Remaining: 90 * time.Second}
	r := Report{Findings: []Finding{{Check: "memory", Level: Warning, Message: "m"}}}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{found, `[{"name":"a/b","dir":"/m","source":"LM Studio","size":5,"valid":true,"problem":""},` +
			`{"name":"c/d","dir":"/n","source":"Hugging Face cache","size":0,"valid":false,"problem":"config.json: missing"}]`},
		{p, `{"repo":"a/b","done":1,"total":2,"filesDone":0,"filesTotal":0,"current":"","bytesPerSecond":0,"finished":false,"remainingSeconds":90}`},
		{r.Findings, `[{"check":"memory","level":"warning","message":"m"}]`},
	} {
		got, err := json.Marshal(tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("JSON %s (%v)\nwant %s", got, err, tc.want)
		}
	}
}

func TestProgressString(t *testing.T) {
	for _, tc := range []struct {
		p    Progress
		want string
	}{
		{Progress{Repo: "r", Done: 9_180_000_000, Total: 20_400_000_000, Remaining: 12 * time.Minute}, "Downloading r: 45% (9.18 GB of 20.4 GB), 12 min left"},
		{Progress{Repo: "r", Done: 0, Total: 20_400_000_000, Remaining: -1}, "Downloading r: 0% (0 bytes of 20.4 GB)"},
		{Progress{Repo: "r", Done: 20_000_000_000, Total: 20_400_000_000, Remaining: 20 * time.Second}, "Downloading r: 98% (20.0 GB of 20.4 GB), less than a minute left"},
		{Progress{Repo: "r", Done: 1000, Total: 20_400_000_000, Remaining: 5 * time.Hour}, "Downloading r: 0% (1.00 KB of 20.4 GB), 5 h left"},
		{Progress{Repo: "r", Total: 20_400_000_000, Finished: true}, "Downloaded r (20.4 GB)"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
