package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine"
)

// TestDemoGreedyThroughAPI runs every case of the demo model's reference
// (transformers, greedy, thinking off, at most 48 new tokens) through
// /v1/chat/completions: the text must match exactly.
func TestDemoGreedyThroughAPI(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "engine", "internal", "fixtures", "testdata", "demo", "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Question   string `json:"question"`
			PromptIDs  []int  `json:"prompt_ids"`
			GreedyText string `json:"greedy_text"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) == 0 {
		t.Fatal("greedy.json has no cases")
	}
	ts := startServer(t, loadModel(t, demoDir, engine.LoadOptions{}), nil)
	for _, c := range ref.Cases {
		t.Run(c.Question, func(t *testing.T) {
			v := post(t, ts.url+"/v1/chat/completions", map[string]any{
				"model": "suzuran-tiny", "messages": userMessage(c.Question), "temperature": 0, "max_tokens": 48,
				"chat_template_kwargs": map[string]any{"enable_thinking": false},
			}).json(t)
			if got := path(v, "choices", 0, "message", "content"); got != c.GreedyText {
				t.Errorf("got  %q\nwant %q", got, c.GreedyText)
			}
			if got := path(v, "usage", "prompt_tokens"); got != float64(len(c.PromptIDs)) {
				t.Errorf("prompt_tokens %v, the reference prompt has %d", got, len(c.PromptIDs))
			}
		})
	}
}

// TestDemoCannotThinkThroughAPI: the demo model, in its installed folder,
// answers a request that asks for thinking with thinking off, as the
// window and the terminal chat do: the prompt and the answer are the
// reference's thinking-off ones.
func TestDemoCannotThinkThroughAPI(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "engine", "internal", "fixtures", "testdata", "demo", "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Question   string `json:"question"`
			PromptIDs  []int  `json:"prompt_ids"`
			GreedyText string `json:"greedy_text"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &ref); err != nil || len(ref.Cases) == 0 {
		t.Fatalf("greedy.json: %v, %d cases", err, len(ref.Cases))
	}
	abs, err := filepath.Abs(demoDir)
	if err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(t.TempDir(), models.FolderName())
	if err := os.Symlink(abs, installed); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, loadModel(t, installed, engine.LoadOptions{}), nil)
	c := ref.Cases[0]
	v := post(t, ts.url+"/v1/chat/completions", map[string]any{
		"model": models.DemoName, "messages": userMessage(c.Question), "temperature": 0, "max_tokens": 48,
		"chat_template_kwargs": map[string]any{"enable_thinking": true},
	}).json(t)
	if got := path(v, "usage", "prompt_tokens"); got != float64(len(c.PromptIDs)) {
		t.Errorf("prompt_tokens %v, the thinking-off prompt has %d", got, len(c.PromptIDs))
	}
	if got := path(v, "choices", 0, "message", "content"); got != c.GreedyText {
		t.Errorf("got  %q\nwant %q", got, c.GreedyText)
	}
}
