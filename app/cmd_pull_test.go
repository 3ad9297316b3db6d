package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/app/internal/fakehub"
)

// tinyModel is the fixture model of the real architecture, in the MLX
// layout that pull downloads.
var tinyModel = filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")

const tinyRepo = "mlx-community/Qwen3.6-tiny-4bit"

// hubEnv points the hub settings, the home folder and the settings file of
// the commands the test runs at fresh folders and the fake hub.
func hubEnv(t *testing.T, h *fakehub.Hub) (home, cache string) {
	home = t.TempDir()
	cache = filepath.Join(home, "hf-cache")
	for k, v := range map[string]string{
		"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"), "XDG_CACHE_HOME": filepath.Join(home, "cache"),
		"HF_ENDPOINT": h.URL, "HF_HUB_CACHE": cache, "HF_HOME": filepath.Join(home, "hf-home"),
		"HF_TOKEN": "", "HF_HUB_OFFLINE": "",
	} {
		t.Setenv(k, v)
	}
	return home, cache
}

func readSettings(t *testing.T, home string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(home, "config", "suzuran", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPullThenModels(t *testing.T) {
	h := fakehub.New(t)
	repo := h.AddDir(t, tinyRepo, tinyModel)
	home, cache := hubEnv(t, h)
	snapshot := filepath.Join(cache, "models--mlx-community--Qwen3.6-tiny-4bit", "snapshots", repo.Commit)

	out, stderr, err := execute(t, "pull", tinyRepo)
	if err != nil {
		t.Fatalf("suzuran pull: %v\n%s", err, stderr)
	}
	t.Logf("suzuran pull, not on a terminal:\n%s", stderr)
	if strings.TrimSpace(out) != snapshot {
		t.Errorf("pull printed %q, want the snapshot folder %s", out, snapshot)
	}
	for _, want := range []string{
		tinyRepo + "@main: 1.40 MB, 1.40 MB to download into ~/hf-cache",
		"ok:", "memory",
		tinyRepo + ": 100% 1.40 MB / 1.40 MB, 6 of 6 files",
		"every file checked against its SHA-256",
		tinyRepo + " is now the model Suzuran uses",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("pull's messages do not say %q", want)
		}
	}
	if strings.Contains(stderr, "\r") || strings.Contains(stderr, "\x1b[") {
		t.Error("pull drew a terminal progress bar into a pipe")
	}
	if got := readSettings(t, home)["model"]; got != snapshot {
		t.Errorf(`settings "model" = %v, want %s`, got, snapshot)
	}

	checkPullAgain(t, h, snapshot, repo.Commit)

	lm, broken := checkModelsList(t, home, repo.Commit)

	checkModelsUse(t, home, snapshot, lm, broken)
}

// checkPullAgain: pulled again, nothing is fetched; offline, or with the
// hub out of reach, the cached snapshot is used.
func checkPullAgain(t *testing.T, h *fakehub.Hub, snapshot, commit string) {
	t.Helper()
	// Pulled again, nothing is fetched and the settings stay.
	h.ResetCounts()
	if _, stderr, err := execute(t, "pull", tinyRepo); err != nil || !strings.Contains(stderr, "is already in ~/hf-cache/models--mlx-community--Qwen3.6-tiny-4bit/snapshots/"+commit) {
		t.Fatalf("second pull: %v\n%s", err, stderr)
	}
	if n := h.FileRequests(); n != 0 {
		t.Errorf("the second pull made %d file requests, want 0", n)
	}
	// Offline, the cached copy is used without asking the hub.
	h.ResetCounts()
	t.Setenv("HF_HUB_OFFLINE", "1")
	if out, stderr, err := execute(t, "pull", tinyRepo); err != nil || strings.TrimSpace(out) != snapshot || !strings.Contains(stderr, "is already in") {
		t.Fatalf("offline pull: %v\n%s%s", err, out, stderr)
	}
	if n := h.APIRequests() + h.FileRequests(); n != 0 {
		t.Errorf("the offline pull made %d requests, want 0", n)
	}
	t.Setenv("HF_HUB_OFFLINE", "")
	// With the hub's connection refused, the cached copy is used at once
	// and pull says it is offline (the default retries would wait a
	// minute; 2 s leaves a loaded machine ample room).
	h.Close()
	start := time.Now()
	out, stderr, err := execute(t, "pull", tinyRepo)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("pull with the hub out of reach took %s, want under 2 s", took)
	}
	if err != nil || strings.TrimSpace(out) != snapshot || !strings.Contains(stderr, "offline: cannot reach "+h.URL) || !strings.Contains(stderr, "is already in") {
		t.Fatalf("pull with the hub out of reach: %v\n%s%s", err, out, stderr)
	}
}

// checkModelsList: an LM Studio copy and a broken folder, made under home,
// show up in suzuran models beside the pulled snapshot; it returns their
// folders.
func checkModelsList(t *testing.T, home, commit string) (lm, broken string) {
	t.Helper()
	// An LM Studio copy and a broken folder show up in the list.
	lm = filepath.Join(home, ".lmstudio", "models", "lmstudio-community", "Qwen3.6-tiny-MLX")
	copyDir(t, tinyModel, lm)
	broken = filepath.Join(home, ".cache", "lm-studio", "models", "someone", "Broken")
	copyDir(t, tinyModel, broken)
	os.Remove(filepath.Join(broken, "model.safetensors"))

	out, stderr, err := execute(t, "models")
	if err != nil {
		t.Fatalf("suzuran models: %v\n%s", err, stderr)
	}
	t.Logf("suzuran models:\n%s", out)
	lines := strings.Split(out, "\n")
	wantRows := []struct{ prefix, contains string }{
		{"  NAME", "STATUS"},
		{"  lmstudio-community/Qwen3.6-tiny-MLX", "LM Studio: ~/.lmstudio/models/lmstudio-community/Qwen3.6-tiny-MLX"},
		{"* " + tinyRepo, "Hugging Face cache: ~/hf-cache/models--mlx-community--Qwen3.6-tiny-4bit/snapshots/" + commit},
		{"  someone/Broken", "model.safetensors"},
		{"  Suzuran Tiny (demo)", "built in"},
	}
	if len(lines) < len(wantRows) {
		t.Fatalf("models printed %d lines, want %d", len(lines), len(wantRows))
	}
	for i, w := range wantRows {
		if !strings.HasPrefix(lines[i], w.prefix) || !strings.Contains(lines[i], w.contains) {
			t.Errorf("line %d %q, want it to start with %q and contain %q", i, lines[i], w.prefix, w.contains)
		}
	}
	if !strings.Contains(lines[1], "ready") || !strings.Contains(lines[2], "1.40 MB") {
		t.Errorf("the valid models should be ready with their size: %q, %q", lines[1], lines[2])
	}
	return lm, broken
}

// checkModelsUse: models use, by name and by folder, sets the model and
// keeps the other settings; a broken folder or an unknown name is refused.
func checkModelsUse(t *testing.T, home, snapshot, lm, broken string) {
	t.Helper()
	// models use, by name and by folder; the other settings stay.
	settingsFile := filepath.Join(home, "config", "suzuran", "settings.json")
	os.WriteFile(settingsFile, []byte(`{"model": "`+snapshot+`", "api": {"enabled": true}}`), 0o644)
	if out, stderr, err := execute(t, "models", "use", "Qwen3.6-tiny-MLX"); err != nil || !strings.Contains(out, "now uses lmstudio-community/Qwen3.6-tiny-MLX") {
		t.Fatalf("models use NAME: %v\n%s%s", err, out, stderr)
	}
	s := readSettings(t, home)
	if s["model"] != lm || s["api"] == nil {
		t.Errorf("settings after models use: %v, want model %s and api kept", s, lm)
	}
	if _, _, err := execute(t, "models", "use", snapshot); err != nil {
		t.Fatal(err)
	}
	if got := readSettings(t, home)["model"]; got != snapshot {
		t.Errorf(`settings "model" = %v, want %s`, got, snapshot)
	}
	for _, tc := range []struct{ arg, says string }{
		{broken, "model.safetensors"},
		{"no-such-model", `no model named "no-such-model"`},
	} {
		_, stderr, err := execute(t, "models", "use", tc.arg)
		if err == nil || !strings.Contains(stderr, tc.says) {
			t.Errorf("models use %s: %v, stderr %q, want an error saying %q", tc.arg, err, stderr, tc.says)
		}
	}
	if got := readSettings(t, home)["model"]; got != snapshot {
		t.Errorf("a refused models use changed the setting to %v", got)
	}
}

func TestPullErrors(t *testing.T) {
	h := fakehub.New(t)
	h.AddDir(t, tinyRepo, tinyModel)
	h.Add("meta-llama/Llama-3.2-1B", map[string][]byte{
		"config.json":       []byte(`{"model_type":"llama"}`),
		"model.safetensors": make([]byte, 64),
	})
	for _, tc := range []struct {
		args []string
		env  map[string]string
		says string
	}{
		{[]string{"pull", "meta-llama/Llama-3.2-1B"}, nil, `field model_type is "llama"`},
		{[]string{"pull", "mlx-community/Missing"}, nil, "no such model"},
		{[]string{"pull", tinyRepo, "--revision", "v2"}, nil, `no revision "v2"`},
		{[]string{"pull", tinyRepo}, map[string]string{"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			hubEnv(t, h)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, stderr, err := execute(t, tc.args...)
			if err == nil || !strings.Contains(stderr, tc.says) {
				t.Errorf("err %v, stderr %q: want an error saying %q", err, stderr, tc.says)
			}
		})
	}
}

// copyDir copies the files of a folder.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
