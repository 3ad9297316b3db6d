package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// TestLoadRejectsBadFiles edits the tiny model's tokenizer.json in ways a
// corrupt or foreign file would differ, and checks that each is refused
// with an error naming the part of the file at fault, not a panic or an
// allocation sized by a garbage id.
func TestLoadRejectsBadFiles(t *testing.T) {
	data, err := os.ReadFile(fixtures.Path(t, "qwen35moe-tiny", "hf-bf16", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(f map[string]any)
		want string
	}{
		{"another model type", func(f map[string]any) { modelSection(f)["type"] = "WordPiece" }, `model.type "WordPiece"`},
		{"vocab not an object", func(f map[string]any) { modelSection(f)["vocab"] = []int{1, 2} }, "model.vocab"},
		{"negative vocab id", func(f map[string]any) { modelSection(f)["vocab"].(map[string]any)["a"] = -5 }, "model.vocab"},
		{"huge vocab id", func(f map[string]any) { modelSection(f)["vocab"].(map[string]any)["a"] = 1 << 30 }, "model.vocab"},
		{"merge of unknown tokens", func(f map[string]any) {
			modelSection(f)["merges"] = append([]any{[]string{"qqq", "xxx"}}, modelSection(f)["merges"].([]any)...)
		}, "model.merges[0]"},
		{"added token with huge id", func(f map[string]any) {
			f["added_tokens"] = append(f["added_tokens"].([]any), map[string]any{"id": 1 << 40, "content": "x", "special": true})
		}, `added_tokens: "x" has id`},
		{"added token with negative id", func(f map[string]any) {
			f["added_tokens"] = append(f["added_tokens"].([]any), map[string]any{"id": -1, "content": "x", "special": true})
		}, `added_tokens: "x" has negative id`},
		{"another normalizer", func(f map[string]any) { f["normalizer"] = map[string]any{"type": "Lowercase"} }, `normalizer "Lowercase"`},
		{"another decoder", func(f map[string]any) { f["decoder"] = map[string]any{"type": "WordPiece"} }, `decoder "WordPiece"`},
		{"no pre-tokenizer", func(f map[string]any) { delete(f, "pre_tokenizer") }, "pre_tokenizer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f map[string]any
			if err := json.Unmarshal(data, &f); err != nil {
				t.Fatal(err)
			}
			c.edit(f)
			edited, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parse(edited); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func modelSection(f map[string]any) map[string]any { return f["model"].(map[string]any) }
