package gpu

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// TestDemoGreedy runs the demo model (Suzuran Tiny, trained weights, MLX
// 4-bit) on the GPU path with the default bf16 KV cache: for each question
// of the demo's greedy.json, the greedy answer must be transformers' ids —
// trained weights give the realistic logit gaps a user sees — at every
// step whose top two logits are further apart than bf16Tolerance lets them
// move (fixtures.CheckGreedy; greedy.json has no logits, so the run's own
// judge the gap).
func TestDemoGreedy(t *testing.T) {
	demo := fixtures.Path(t, "demo")
	raw, err := os.ReadFile(filepath.Join(demo, "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Question  string `json:"question"`
			PromptIDs []int  `json:"prompt_ids"`
			GreedyIDs []int  `json:"greedy_ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) == 0 {
		t.Fatal("greedy.json has no cases")
	}
	cases := ref.Cases
	if testing.Short() {
		cases = cases[:3] // trimmed: -short keeps the first questions
	}
	b, w := openModel(t, fixtures.Demo(t), Options{})
	greedy := &model.Sampling{}
	for _, c := range cases {
		seq, err := b.NewSequence(len(c.PromptIDs) + len(c.GreedyIDs))
		if err != nil {
			t.Fatal(err)
		}
		res, err := model.Run(b, w, seq, model.Input{IDs: c.PromptIDs, Sample: greedy, Logits: model.LogitsLast})
		if err != nil {
			t.Fatal(err)
		}
		ids, logits := []int{res.Token}, res.Logits
		for len(ids) < len(c.GreedyIDs) {
			r, err := model.Run(b, w, seq, model.Input{Sample: greedy, Logits: model.LogitsLast})
			if err != nil {
				t.Fatal(err)
			}
			ids, logits = append(ids, r.Token), append(logits, r.Logits...)
		}
		if err := fixtures.CheckGreedy(ids, c.GreedyIDs, logits, w.Config.VocabSize, bf16Tolerance); err != nil {
			t.Errorf("%q: %v", c.Question, err)
		}
		seq.Close()
	}
}
