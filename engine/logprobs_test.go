package engine

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// TestLogprobsMatchTransformers decodes the tiny reference model greedily
// with logprobs on: the tokens are the reference's, each token's logprob is
// the log-softmax of the logits transformers computed for that step, and the
// top alternatives are the reference's most likely tokens in order.
//
// It runs on the exact path: the fast path's rounded activations move the
// logits by up to 5e-3 of the largest, which is that path's own bar.
// Tolerance: the logprobs land within 6.5e-6 of the float64 log-softmax of
// the reference's logits (measured over both layouts, the chosen tokens and
// their alternatives), so 5e-5 absolute leaves 7× room; a wrong
// normalisation (a missing log-sum-exp, a temperature applied) misses by
// orders of magnitude more.
func TestLogprobsMatchTransformers(t *testing.T) {
	const tol, top = 5e-5, 3
	for _, ref := range fixtures.ModelsNamed(t, fixtures.TinyHF, fixtures.TinyMLX) { // the tiny model, both layouts
		t.Run(ref.Name, func(t *testing.T) {
			e, err := Load(ref.Dir, LoadOptions{Backend: "cpu", Precision: "exact"})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			s, err := e.Submit(context.Background(), Request{Prompt: ref.Prompt, MaxTokens: len(ref.GenIDs),
				Logprobs: true, TopLogprobs: top})
			if err != nil {
				t.Fatal(err)
			}
			step := 0
			for ev := range s.Events {
				if len(ev.Logprobs) != len(ev.IDs) {
					t.Fatalf("step %d: %d logprobs for %d tokens", step, len(ev.Logprobs), len(ev.IDs))
				}
				for i, tok := range ev.IDs {
					lp := ev.Logprobs[i]
					if step >= len(ref.GenIDs) || tok != ref.GenIDs[step] {
						t.Fatalf("step %d: token %d, reference %v", step, tok, ref.GenIDs)
					}
					if lp == nil {
						t.Fatalf("step %d: no logprob", step)
					}
					row := ref.GenLogits[step*ref.Vocab : (step+1)*ref.Vocab]
					want := logSoftmax64(row)
					if d := math.Abs(lp.Logprob - want[tok]); !(d <= tol) {
						t.Errorf("step %d: logprob %.6f, reference %.6f", step, lp.Logprob, want[tok])
					}
					order := make([]int, len(want))
					for i := range order {
						order[i] = i
					}
					slices.SortStableFunc(order, func(a, b int) int {
						switch {
						case want[a] > want[b]:
							return -1
						case want[a] < want[b]:
							return 1
						}
						return 0
					})
					if len(lp.Top) != top {
						t.Fatalf("step %d: %d alternatives, want %d", step, len(lp.Top), top)
					}
					for i, alt := range lp.Top {
						if alt.Token != order[i] || math.Abs(alt.Logprob-want[order[i]]) > tol {
							t.Errorf("step %d alternative %d: %+v, reference token %d at %.6f", step, i, alt, order[i], want[order[i]])
						}
					}
					if lp.Top[0].Token != tok {
						t.Errorf("step %d: greedy token %d is not the most likely %d", step, tok, lp.Top[0].Token)
					}
					step++
				}
			}
			if step == 0 {
				t.Fatal("no tokens generated")
			}
		})
	}
}

// logSoftmax64 is the reference log-softmax in float64.
func logSoftmax64(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - m - math.Log(sum)
	}
	return out
}

// Asking for logprobs samples on the host with the same rule: a seeded,
// sampled answer is the same token for token with logprobs on as off, and
// TopLogprobs past the bound is refused.
func TestLogprobsKeepTheTokens(t *testing.T) {
	e := loadDemo(t, "cpu", LoadOptions{})
	c := greedyCaseFor(t, "What does json.dumps do?")
	req := Request{Prompt: c.PromptIDs, MaxTokens: 12}
	req.Sampling.Temperature, req.Sampling.TopP, req.Sampling.TopK, req.Sampling.Seed = 0.9, 0.95, 20, 7
	plain, _, _ := collect(t, e, req)
	req.Logprobs = true
	with, _, _ := collect(t, e, req)
	if !slices.Equal(plain, with) {
		t.Errorf("with logprobs %v, without %v", with, plain)
	}
	req.TopLogprobs = MaxTopLogprobs + 1
	if _, err := e.Submit(context.Background(), req); err == nil {
		t.Error("TopLogprobs past the bound was accepted")
	}
}
