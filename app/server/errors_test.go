package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
)

// TestErrorsNameNoServerPaths answers requests that fail on the model
// folder's files (the template refuses the conversation; there is no
// template at all) from a model under a deep folder: the message says what
// is wrong and names the file, but no folder of the server's disk.
func TestErrorsNameNoServerPaths(t *testing.T) {
	root := filepath.Join(t.TempDir(), "home", "someone", "Library", "Application Support", "models")
	withTemplate := filepath.Join(root, "with-template")
	noTemplate := filepath.Join(root, "no-template")
	for _, dir := range []string{withTemplate, noTemplate} {
		if err := os.CopyFS(dir, os.DirFS(fixtureDir)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(noTemplate, "chat_template.jinja")); err != nil {
		t.Fatal(err)
	}
	leaks := func(msg string) bool {
		return strings.Contains(msg, root) || strings.Contains(msg, "someone") || strings.Contains(msg, "Application Support")
	}
	for _, tc := range []struct {
		name, dir, route string
		body             any
		mentions         string
	}{
		{"template refuses", withTemplate, "/v1/chat/completions",
			map[string]any{"messages": []any{map[string]any{"role": "system", "content": "only a system prompt"}}}, "No user query found"},
		{"template refuses, anthropic", withTemplate, "/v1/messages",
			map[string]any{"max_tokens": 1, "system": "s", "messages": []any{map[string]any{"role": "assistant", "content": "a"}}}, "No user query found"},
		{"no template", noTemplate, "/v1/chat/completions",
			map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "no chat template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, loadModel(t, tc.dir, engine.LoadOptions{}), nil)
			res := post(t, ts.url+tc.route, tc.body)
			v := res.json(t)
			msg, _ := path(v, "error", "message").(string)
			if res.status != 400 || !strings.Contains(msg, tc.mentions) {
				t.Fatalf("%d %s, want a 400 saying %q", res.status, res.body, tc.mentions)
			}
			if leaks(msg) {
				t.Errorf("the message names the server's folders: %s", msg)
			}
		})
	}
}

// TestWithoutPaths keeps the API's routes, URLs and repository names, and
// cuts paths of the disk to their last element.
func TestWithoutPaths(t *testing.T) {
	for in, want := range map[string]string{
		"chat template /Users/ann/.cache/huggingface/hub/models--q/snapshots/abc/chat_template.jinja: No user query found.": "chat template chat_template.jinja: No user query found.",
		"opening /Users/ann/Library/Application Support/Suzuran/suzuran.db failed":                                          "opening suzuran.db failed",
		"loading ~/models/Qwen3.6 (config.json): bad":                                                                       "loading Qwen3.6 (config.json): bad",
		"no route GET /v1/engines: this server answers /v1/chat/completions, /v1/completions":                               "no route GET /v1/engines: this server answers /v1/chat/completions, /v1/completions",
		"see https://huggingface.co/mlx-community/Qwen3.6-35B-A3B-4bit/tree/main":                                           "see https://huggingface.co/mlx-community/Qwen3.6-35B-A3B-4bit/tree/main",
		"the model mlx-community/Qwen3.6 is not served":                                                                     "the model mlx-community/Qwen3.6 is not served",
		"POST /api/call/Send is the window's":                                                                               "POST /api/call/Send is the window's",
	} {
		if got := withoutPaths(in); got != want {
			t.Errorf("withoutPaths(%q) = %q, want %q", in, got, want)
		}
	}
}
