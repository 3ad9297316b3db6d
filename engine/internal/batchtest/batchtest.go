// Package batchtest is the batched pass's contract test, shared by the
// backends: sequences that join a batch at different steps, prefill their
// prompts in chunks and decode must get, pass for pass, the bits they get
// when each runs alone.
//
// Only tests import this package.
package batchtest

import (
	"math"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Plan is one sequence's passes: it joins the batch at step Start,
// prefills Prompt in Chunks, then decodes Decode steps.
type Plan struct {
	Start  int
	Prompt []int
	Chunks []int // prefill chunk sizes, summing to len(Prompt)
	Decode int   // decode steps after the prompt
}

// Inputs are the plan's passes in order: every pass returns its last row's
// logits and greedy token, so that each can be compared. Decode steps give
// no ids: they consume the token the sequence's previous pass sampled.
func (p Plan) Inputs() []model.Input {
	var ins []model.Input
	pos := 0
	for _, n := range p.Chunks {
		ins = append(ins, model.Input{IDs: p.Prompt[pos : pos+n], Logits: model.LogitsLast, Sample: &model.Sampling{}})
		pos += n
	}
	for range p.Decode {
		ins = append(ins, model.Input{Logits: model.LogitsLast, Sample: &model.Sampling{}})
	}
	return ins
}

// Prompt is n token ids below 1000, different for each seed.
func Prompt(seed, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (seed*131 + i*37 + 5) % 1000
	}
	return ids
}

// Plans are four sequences joining at steps 0, 1, 2 and 4 with prompts of
// 12, 5, 28 and 1 tokens, so that the batches mix decode steps at different
// positions with prefill chunks of 8 and 12 rows (the matrix-product
// kernels) and of 1 to 3 rows (which join the decode rows).
func Plans() []Plan {
	return []Plan{
		{Start: 0, Prompt: Prompt(1, 12), Chunks: []int{12}, Decode: 9},
		{Start: 1, Prompt: Prompt(2, 5), Chunks: []int{2, 3}, Decode: 7},
		{Start: 2, Prompt: Prompt(3, 28), Chunks: []int{8, 8, 12}, Decode: 4},
		{Start: 4, Prompt: Prompt(4, 1), Chunks: []int{1}, Decode: 6},
	}
}

// capacity is every sequence's capacity in tokens.
const capacity = 64

// Alone runs each plan's passes by itself, each on a new sequence of b,
// and returns the results, pass by pass.
func Alone(t *testing.T, b model.Backend, w *model.Weights, plans []Plan) [][]model.Result {
	t.Helper()
	alone := make([][]model.Result, len(plans))
	for i, plan := range plans {
		seq, err := b.NewSequence(capacity)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range plan.Inputs() {
			res, err := model.Run(b, w, seq, in)
			if err != nil {
				t.Fatal(err)
			}
			alone[i] = append(alone[i], res)
		}
	}
	return alone
}

// Together runs the plans on new sequences of b — at each step the next
// pass of every sequence that has started and not finished, in one
// model.RunBatch — and fails t unless every result in the batch has the
// token and the logits, bit for bit, of the same pass in alone (Alone's
// results), the batches held every plan at once, and every sequence ended
// where its plan does. Tolerance: none, the promise the engine's scheduler
// relies on. It returns the number of batched steps.
func Together(t *testing.T, b model.Backend, w *model.Weights, plans []Plan, alone [][]model.Result) int {
	t.Helper()
	seqs := make([]model.Sequence, len(plans))
	inputs := make([][]model.Input, len(plans))
	for i, plan := range plans {
		var err error
		if seqs[i], err = b.NewSequence(capacity); err != nil {
			t.Fatal(err)
		}
		inputs[i] = plan.Inputs()
	}
	lastStart := 0
	for _, plan := range plans {
		lastStart = max(lastStart, plan.Start)
	}
	done := make([]int, len(plans))
	maxBatch, steps := 0, 0
	for step := 0; ; step++ {
		var segs []model.Segment
		var who []int
		for i, plan := range plans {
			if step >= plan.Start && done[i] < len(inputs[i]) {
				segs = append(segs, model.Segment{Seq: seqs[i], In: inputs[i][done[i]]})
				who = append(who, i)
			}
		}
		if len(segs) == 0 {
			if step > lastStart {
				break
			}
			continue
		}
		maxBatch = max(maxBatch, len(segs))
		steps++
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
	for i, plan := range plans {
		if want := len(plan.Prompt) + plan.Decode; seqs[i].Pos() != want {
			t.Fatalf("sequence %d at position %d, want %d", i, seqs[i].Pos(), want)
		}
	}
	return steps
}

// Refuses checks, on two new sequences of b, what a batch may not hold —
// no segment, one sequence twice, every row's logits beside another
// sequence, a step with no token to consume, more tokens than a sequence
// holds, an id outside the vocabulary — each refused by the backend's
// Begin with an error naming the reason and by model.RunBatch (which
// words some reasons its own way), leaving both sequences where they were;
// then a valid batch on them runs.
func Refuses(t *testing.T, b model.Backend, w *model.Weights) {
	t.Helper()
	a, err := b.NewSequence(16)
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.NewSequence(16)
	if err != nil {
		t.Fatal(err)
	}
	greedy := &model.Sampling{}
	cases := []struct {
		name, want string
		segs       []model.Segment
	}{
		{"empty", "at least one segment", nil},
		{"same sequence twice", "already in this pass",
			[]model.Segment{{Seq: a, In: model.Input{IDs: []int{1}}}, {Seq: a, In: model.Input{IDs: []int{2}}}}},
		{"every row's logits beside another", "only by a pass of one sequence",
			[]model.Segment{{Seq: a, In: model.Input{IDs: []int{1}, Logits: model.LogitsAll}}, {Seq: c, In: model.Input{IDs: []int{2}}}}},
		{"no token and none sampled", "sampled",
			[]model.Segment{{Seq: a, In: model.Input{IDs: []int{1}}}, {Seq: c, In: model.Input{Sample: greedy}}}},
		{"too many tokens", "sequence is full", []model.Segment{{Seq: a, In: model.Input{IDs: make([]int, 17)}}}},
		{"an id outside the vocabulary", "outside the vocabulary",
			[]model.Segment{{Seq: a, In: model.Input{IDs: []int{1}}}, {Seq: c, In: model.Input{IDs: []int{w.Config.VocabSize}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Begin(tc.segs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Begin: %v, want an error saying %q", err, tc.want)
			}
			if _, err := model.RunBatch(b, w, tc.segs); err == nil {
				t.Fatal("RunBatch accepted it")
			}
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
