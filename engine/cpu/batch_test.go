package cpu

import (
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// batchPlan is one sequence's passes in TestBatchExact: it joins the batch
// at step start, prefills its prompt in chunks, then decodes.
type batchPlan struct {
	start  int
	prompt []int
	chunks []int // prefill chunk sizes, summing to len(prompt)
	decode int   // decode steps after the prompt
}

// inputs are the plan's passes in order: every pass returns its last row's
// logits and greedy token, so that each can be compared.
func (p batchPlan) inputs() []model.Input {
	var ins []model.Input
	pos := 0
	for _, n := range p.chunks {
		ins = append(ins, model.Input{IDs: p.prompt[pos : pos+n], Logits: model.LogitsLast, Sample: &model.Sampling{}})
		pos += n
	}
	for range p.decode {
		ins = append(ins, model.Input{Logits: model.LogitsLast, Sample: &model.Sampling{}})
	}
	return ins
}

// TestBatchExact checks the batched pass's contract on the CPU: a
// sequence's logits and tokens are bit for bit those of the same sequence
// run alone, whatever else is in the batch. Four sequences join at
// different steps with different prompts, so the batches mix decode steps
// at different positions with prefill chunks long enough for the
// matrix-product kernels (8 and 12 rows) and short ones (3 rows); the Go
// loops and the assembly kernels are both checked. Tolerance: none (bitwise),
// which is the promise the engine's scheduler relies on.
func TestBatchExact(t *testing.T) {
	prompt := func(seed, n int) []int {
		ids := make([]int, n)
		for i := range ids {
			ids[i] = (seed*131 + i*37 + 5) % 1000
		}
		return ids
	}
	plans := []batchPlan{
		{start: 0, prompt: prompt(1, 12), chunks: []int{12}, decode: 9},
		{start: 1, prompt: prompt(2, 5), chunks: []int{2, 3}, decode: 7},
		{start: 2, prompt: prompt(3, 28), chunks: []int{8, 8, 12}, decode: 4},
		{start: 4, prompt: prompt(4, 1), chunks: []int{1}, decode: 6},
	}
	for _, ref := range fixtures.Models(t)[:2] {
		t.Run(ref.Name, func(t *testing.T) {
			withKernels(t, func(t *testing.T, k kernelSet) {
				b, w := openModel(t, ref.Dir, Options{ISA: k.isa})
				// Alone: each sequence's passes by themselves.
				alone := make([][]model.Result, len(plans))
				for i, plan := range plans {
					seq, _ := b.NewSequence(64)
					for _, in := range plan.inputs() {
						res, err := model.Run(b, w, seq, in)
						if err != nil {
							t.Fatal(err)
						}
						alone[i] = append(alone[i], res)
					}
				}
				// Together: at each step, the next pass of every sequence
				// that has started and not finished, in one batch.
				seqs := make([]model.Sequence, len(plans))
				inputs := make([][]model.Input, len(plans))
				for i, plan := range plans {
					seqs[i], _ = b.NewSequence(64)
					inputs[i] = plan.inputs()
				}
				done := make([]int, len(plans))
				maxBatch := 0
				for step := 0; ; step++ {
					var segs []model.Segment
					var who []int
					for i, plan := range plans {
						if step >= plan.start && done[i] < len(inputs[i]) {
							segs = append(segs, model.Segment{Seq: seqs[i], In: inputs[i][done[i]]})
							who = append(who, i)
						}
					}
					if len(segs) == 0 {
						if step > plans[len(plans)-1].start {
							break
						}
						continue
					}
					maxBatch = max(maxBatch, len(segs))
					results, err := model.RunBatch(b, w, segs)
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					for k, i := range who {
						want, got := alone[i][done[i]], results[k]
						if got.Token != want.Token {
							t.Fatalf("step %d, sequence %d pass %d: token %d in the batch, %d alone", step, i, done[i], got.Token, want.Token)
						}
						if len(got.Logits) != len(want.Logits) {
							t.Fatalf("step %d, sequence %d: %d logits in the batch, %d alone", step, i, len(got.Logits), len(want.Logits))
						}
						for j := range got.Logits {
							if math.Float32bits(got.Logits[j]) != math.Float32bits(want.Logits[j]) {
								t.Fatalf("step %d, sequence %d pass %d: logit %d is %v in the batch, %v alone",
									step, i, done[i], j, got.Logits[j], want.Logits[j])
							}
						}
						done[i]++
					}
				}
				if maxBatch != len(plans) {
					t.Fatalf("the batches held at most %d sequences, the plan has %d", maxBatch, len(plans))
				}
				for i := range plans {
					if seqs[i].Pos() != len(plans[i].prompt)+plans[i].decode {
						t.Fatalf("sequence %d at position %d, want %d", i, seqs[i].Pos(), len(plans[i].prompt)+plans[i].decode)
					}
				}
			})
		})
	}
}

// TestBatchRefuses checks what a batch may not hold.
func TestBatchRefuses(t *testing.T) {
	ref := fixtures.Models(t)[0]
	b, w := openModel(t, ref.Dir, Options{})
	a, _ := b.NewSequence(16)
	c, _ := b.NewSequence(16)
	greedy := &model.Sampling{}
	cases := []struct {
		name string
		segs []model.Segment
	}{
		{"empty", nil},
		{"same sequence twice", []model.Segment{{Seq: a, In: model.Input{IDs: []int{1}}}, {Seq: a, In: model.Input{IDs: []int{2}}}}},
		{"every row's logits beside another", []model.Segment{{Seq: a, In: model.Input{IDs: []int{1}, Logits: model.LogitsAll}}, {Seq: c, In: model.Input{IDs: []int{2}}}}},
		{"no token and none sampled", []model.Segment{{Seq: a, In: model.Input{IDs: []int{1}}}, {Seq: c, In: model.Input{Sample: greedy}}}},
		{"too many tokens", []model.Segment{{Seq: a, In: model.Input{IDs: make([]int, 17)}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.BeginBatch(tc.segs); err == nil {
				t.Fatal("BeginBatch accepted it")
			}
			if _, err := model.RunBatch(b, w, tc.segs); err == nil {
				t.Fatal("RunBatch accepted it")
			}
			// Nothing was left recording: a pass on each sequence works.
			for _, s := range []model.Sequence{a, c} {
				if s.Pos() != 0 {
					t.Fatalf("a refused batch moved a sequence to %d", s.Pos())
				}
			}
		})
	}
	if _, err := model.RunBatch(b, w, []model.Segment{{Seq: a, In: model.Input{IDs: []int{1}}}, {Seq: c, In: model.Input{IDs: []int{2, 3}}}}); err != nil {
		t.Fatalf("a valid batch after the refused ones: %v", err)
	}
}
