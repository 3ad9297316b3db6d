package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runWithStdin executes the command line with stdin and returns stdout
// alone. Each root builds its subcommands afresh, so their flags start at
// the defaults, as in a fresh process.
func runWithStdin(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// repoFixtures is the engine's reference data (engine/internal/fixtures,
// which only engine packages may import) seen from this package's folder.
func repoFixtures(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "engine", "internal", "fixtures", "testdata")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("fixtures not found at %s: %v", dir, err)
	}
	return dir
}

// Every fixture conversation renders through the command to exactly the
// reference text, with no newline added.
func TestRenderCommand(t *testing.T) {
	fx := repoFixtures(t)
	data, err := os.ReadFile(filepath.Join(fx, "chat", "chat-public.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct {
			Name                string          `json:"name"`
			Messages            json.RawMessage `json:"messages"`
			Tools               json.RawMessage `json:"tools"`
			Kwargs              map[string]any  `json:"kwargs"`
			AddGenerationPrompt bool            `json:"add_generation_prompt"`
			Text                string          `json:"text"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(fx, "qwen35moe-tiny", "mlx-4bit")
	for _, c := range f.Cases {
		// Written by hand so the messages' and tools' key order is the
		// fixture's.
		stdin := `{"messages": ` + string(c.Messages) + `, "tools": ` + string(c.Tools)
		if c.AddGenerationPrompt {
			stdin += `, "add_generation_prompt": true`
		}
		if v, ok := c.Kwargs["enable_thinking"]; ok {
			stdin += `, "enable_thinking": ` + map[bool]string{true: "true", false: "false"}[v.(bool)]
		}
		stdin += "}"
		out, err := runWithStdin(t, stdin, "render", "--model", model)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if out != c.Text {
			t.Errorf("%s:\n got  %q\n want %q", c.Name, out, c.Text)
		}
	}

	if _, err := runWithStdin(t, `{"messages": []}`, "render", "--model", model); err == nil || !strings.Contains(err.Error(), "No messages provided.") {
		t.Errorf("empty conversation: error %v, want the template's own message", err)
	}
	if _, err := runWithStdin(t, `{"messages": [`, "render", "--model", model); err == nil {
		t.Error("broken JSON was accepted")
	}
	// Without --model the demo model's template renders (installed into a
	// private cache): its own error for an empty conversation shows it ran.
	isolate(t)
	if _, err := runWithStdin(t, `{}`, "render"); err == nil || !strings.Contains(err.Error(), "No messages provided.") {
		t.Errorf("render without --model (the demo model): error %v", err)
	}
}
