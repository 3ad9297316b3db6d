package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/assets/models"
)

// isolate points the user's config and cache folders at fresh temporary
// folders, so the test neither reads nor writes the real ones.
func isolate(t *testing.T) (config, cache string) {
	t.Helper()
	config, cache = t.TempDir(), t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", config)
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", t.TempDir()) // macOS derives both from HOME
	return config, cache
}

func TestResolveModelOrder(t *testing.T) {
	config, _ := isolate(t)

	// Nothing given or configured: the demo model, installed, with a note.
	dir, note, err := resolveModel("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatalf("demo model folder %s: %v", dir, err)
	}
	if !strings.Contains(note, "using the demo model Suzuran Tiny") || !strings.Contains(note, "--model") {
		t.Fatalf("demo note = %q", note)
	}

	// A configured model wins over the demo, silently.
	mine := t.TempDir()
	if err := os.WriteFile(filepath.Join(mine, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(config, "suzuran", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(`{"model": "`+mine+`", "other": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, note, err := resolveModel(""); err != nil || got != mine || note != "" {
		t.Fatalf("configured: got %q, %q, %v; want %q", got, note, err, mine)
	}

	// The flag wins over the setting.
	if got, note, err := resolveModel(dir); err != nil || got != dir || note != "" {
		t.Fatalf("flag: got %q, %q, %v; want %q", got, note, err, dir)
	}

	// Errors name what to fix.
	if _, _, err := resolveModel(filepath.Join(mine, "missing")); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Fatalf("missing --model folder: %v", err)
	}
	if _, _, err := resolveModel(filepath.Join(mine, "config.json")); err == nil || !strings.Contains(err.Error(), "is a file") {
		t.Fatalf("--model naming a file: %v", err)
	}
	if err := os.WriteFile(settings, []byte(`{"model": "/nonexistent/folder"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := resolveModel(""); err == nil || !strings.Contains(err.Error(), "settings.json") {
		t.Fatalf("configured folder missing: %v", err)
	}
	if err := os.WriteFile(settings, []byte(`not json`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := resolveModel(""); err == nil || !strings.Contains(err.Error(), "settings.json") {
		t.Fatalf("malformed settings: %v", err)
	}
}

// TestCommandsDefaultToTheDemoModel runs every command that takes --model
// without it: each must work on the demo model, installed from the binary.
func TestCommandsDefaultToTheDemoModel(t *testing.T) {
	isolate(t)
	// "Hello!" is ids 1368 0 in the demo's vocabulary (greedy.json).
	out, err := runWithStdin(t, "Hello!", "tokenize")
	if err != nil || strings.Join(strings.Fields(out), "") != "[1368,0]" {
		t.Errorf("tokenize without --model: %q, %v; want [1368,0]", out, err)
	}
	out, err = runWithStdin(t, `{"messages": [{"role": "user", "content": "Hello!"}], "add_generation_prompt": true, "enable_thinking": false}`, "render")
	if want := "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; err != nil || out != want {
		t.Errorf("render without --model: %q, %v; want %q", out, err, want)
	}
	file := filepath.Join(t.TempDir(), "logits.safetensors")
	if _, err := runWithStdin(t, "", "logits", "--ids", "4093,278,198,1368,0", "--out", file); err != nil {
		t.Errorf("logits without --model: %v", err)
	}
	if st, err := os.Stat(file); err != nil || st.Size() == 0 {
		t.Errorf("logits without --model wrote nothing: %v", err)
	}
	// bench (chat has its own tests) measures the demo model and says so.
	out, stderr, err := execute(t, "bench", "--prompt", "8", "--gen", "2", "--runs", "1", "--warmup", "2",
		"--copy-mib", "4", "--layer-costs", "off", "--json")
	var rep struct {
		Model struct {
			Dir string `json:"dir"`
		} `json:"model"`
	}
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !modelhost.IsDemo(rep.Model.Dir) {
		t.Errorf("bench without --model: %v, measured %q; want the demo model\n%s", err, rep.Model.Dir, stderr)
	}
	if !strings.Contains(stderr, "using the demo model "+models.DemoName) {
		t.Errorf("bench without --model does not say it uses the demo model:\n%s", stderr)
	}
}

// The demo model's full note shows once per machine (a marker in the user
// cache folder remembers it); later commands print one short line.
func TestDemoNoteOncePerMachine(t *testing.T) {
	_, cache := isolate(t)
	var notes []string
	for range 2 {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetIn(strings.NewReader("Hello!"))
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs([]string{"tokenize"})
		if err := root.Execute(); err != nil {
			t.Fatalf("tokenize: %v\n%s", err, errOut.String())
		}
		notes = append(notes, errOut.String())
	}
	if !strings.Contains(notes[0], "using the demo model "+models.DemoName) || !strings.Contains(notes[0], "suzuran pull") || !strings.Contains(notes[0], "--model") {
		t.Errorf("first command's note %q, want the full note", notes[0])
	}
	if notes[1] != demoShortNote+"\n" {
		t.Errorf("second command's note %q, want the one short line %q", notes[1], demoShortNote)
	}
	if len(demoShortNote) > 80 {
		t.Errorf("the short note is %d characters; one terminal line is 80", len(demoShortNote))
	}
	if _, err := os.Stat(filepath.Join(cache, "suzuran", demoNoteMarker)); err != nil {
		t.Errorf("no marker in the cache folder: %v", err)
	}
}
