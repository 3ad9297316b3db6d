package gpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// batchPlan is one sequence's passes in TestBatchMatchesAlone: it joins the
// batch at step start, prefills its prompt in chunks, then decodes.
type batchPlan struct {
	start  int
	prompt []int
	chunks []int // prefill chunk sizes, summing to len(prompt)
	decode int   // decode steps after the prompt
}

// inputs are the plan's passes in order: every pass returns its last row's
// logits and greedy token, so that each can be compared. Decode steps give
// no ids: they consume the token the sequence's previous pass sampled,
// which stays on the device.
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

func testPrompt(seed, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (seed*131 + i*37 + 5) % 1000
	}
	return ids
}

// TestBatchMatchesAlone checks the batched pass's contract on the GPU path
// (emu): a sequence's tokens and logits are those of the same sequence run
// alone, whatever else is in the batch. Four sequences join at different
// steps with different prompts, so batches mix decode steps at different
// positions with prefill chunks long enough for the GEMM and the grouped
// expert GEMMs (12 rows) and short ones (2, 3 and 8 rows, which join the
// decode rows in the GEMV and the grouped expert decode). Tolerance: none
// — the logits must be the same bits — since every kernel forms a row's
// sums the same way whatever rows share its dispatch; that is stronger
// than the half-operand tolerance the issue allows, and it is what makes
// greedy output independent of the batch.
func TestBatchMatchesAlone(t *testing.T) {
	plans := []batchPlan{
		{start: 0, prompt: testPrompt(1, 12), chunks: []int{12}, decode: 9},
		{start: 1, prompt: testPrompt(2, 5), chunks: []int{2, 3}, decode: 7},
		{start: 2, prompt: testPrompt(3, 28), chunks: []int{8, 8, 12}, decode: 4},
		{start: 4, prompt: testPrompt(4, 1), chunks: []int{1}, decode: 6},
	}
	for _, ref := range fixtures.Models(t)[:2] {
		t.Run(ref.Name, func(t *testing.T) {
			b, w := openModel(t, ref.Dir, Options{})
			alone := make([][]model.Result, len(plans))
			for i, plan := range plans {
				seq, err := b.NewSequence(64)
				if err != nil {
					t.Fatal(err)
				}
				for _, in := range plan.inputs() {
					res, err := model.Run(b, w, seq, in)
					if err != nil {
						t.Fatal(err)
					}
					alone[i] = append(alone[i], res)
				}
			}
			before := b.Stats()
			seqs := make([]model.Sequence, len(plans))
			inputs := make([][]model.Input, len(plans))
			for i, plan := range plans {
				var err error
				if seqs[i], err = b.NewSequence(64); err != nil {
					t.Fatal(err)
				}
				inputs[i] = plan.inputs()
			}
			done := make([]int, len(plans))
			maxBatch, steps := 0, 0
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
			for i := range plans {
				if seqs[i].Pos() != len(plans[i].prompt)+plans[i].decode {
					t.Fatalf("sequence %d at position %d, want %d", i, seqs[i].Pos(), len(plans[i].prompt)+plans[i].decode)
				}
			}
			after := b.Stats()
			passes := after.Decode.Passes + after.Prefill.Passes - before.Decode.Passes - before.Prefill.Passes
			buffers := after.Decode.CommandBuffers + after.Prefill.CommandBuffers - before.Decode.CommandBuffers - before.Prefill.CommandBuffers
			if passes != int64(steps) || buffers != int64(steps) {
				t.Errorf("%d batched steps counted %d passes and %d command buffers; want one each per step", steps, passes, buffers)
			}
		})
	}
}

// TestBatchPipelined decodes four sequences together with each step
// submitted before the host waits on the one before: every sequence's next
// token goes from its sampler to its embedding gather on the device. The
// tokens must be those of each sequence decoded alone, with one command
// buffer per step, at most one host wait per step and no readback inside a
// step.
func TestBatchPipelined(t *testing.T) {
	ref := fixtures.Models(t)[1]
	b, w := openModel(t, ref.Dir, Options{})
	const steps = 6
	prompts := [][]int{testPrompt(5, 3), testPrompt(6, 11), testPrompt(7, 1), testPrompt(8, 6)}
	greedy := &model.Sampling{}
	decode := model.Input{Logits: model.LogitsLast, Sample: greedy}
	alone := make([][]int, len(prompts))
	for i, p := range prompts {
		seq, _ := b.NewSequence(32)
		res, err := model.Run(b, w, seq, model.Input{IDs: p, Sample: greedy})
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = []int{res.Token}
		for range steps {
			if res, err = model.Run(b, w, seq, decode); err != nil {
				t.Fatal(err)
			}
			alone[i] = append(alone[i], res.Token)
		}
	}
	segs := make([]model.Segment, len(prompts))
	together := make([][]int, len(prompts))
	for i, p := range prompts {
		seq, _ := b.NewSequence(32)
		segs[i] = model.Segment{Seq: seq, In: model.Input{IDs: p, Sample: greedy}}
	}
	first, err := model.RunBatch(b, w, segs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range segs {
		together[i] = []int{first[i].Token}
		segs[i].In = decode
	}
	before := b.Stats().Decode
	prev, err := model.StartBatch(b, w, segs)
	if err != nil {
		t.Fatal(err)
	}
	for s := 0; s < steps; s++ {
		var next model.Batch
		if s+1 < steps {
			if next, err = model.StartBatch(b, w, segs); err != nil {
				t.Fatal(err)
			}
		}
		res, err := prev.Wait()
		if err != nil {
			t.Fatal(err)
		}
		for i := range res {
			together[i] = append(together[i], res[i].Token)
		}
		prev = next
	}
	if fmt.Sprint(together) != fmt.Sprint(alone) {
		t.Fatalf("greedy ids\ntogether %v\n   alone %v", together, alone)
	}
	d := b.Stats().Decode
	d.Passes -= before.Passes
	d.CommandBuffers -= before.CommandBuffers
	d.HostWaits -= before.HostWaits
	d.Sequences -= before.Sequences
	if d.Passes != steps || d.CommandBuffers != steps || d.HostWaits > steps || d.Sequences != steps*int64(len(prompts)) {
		t.Errorf("%d pipelined steps of %d sequences: %d passes, %d command buffers, %d host waits, %d sequences; want one pass and buffer per step, at most one wait",
			steps, len(prompts), d.Passes, d.CommandBuffers, d.HostWaits, d.Sequences)
	}
	if d.MidStepReadbacks != before.MidStepReadbacks {
		t.Errorf("%d readbacks inside a step", d.MidStepReadbacks-before.MidStepReadbacks)
	}
}

// TestBatchRefuses checks what a batch may not hold, and that a refused
// batch leaves nothing recording and no sequence moved.
func TestBatchRefuses(t *testing.T) {
	ref := fixtures.Models(t)[1]
	b, w := openModel(t, ref.Dir, Options{})
	a, _ := b.NewSequence(16)
	c, _ := b.NewSequence(16)
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
		{"no token and none sampled", "no sampled token",
			[]model.Segment{{Seq: a, In: model.Input{IDs: []int{1}}}, {Seq: c, In: model.Input{Sample: greedy}}}},
		{"too many tokens", "sequence is full", []model.Segment{{Seq: a, In: model.Input{IDs: make([]int, 17)}}}},
		{"an id outside the vocabulary", "outside the vocabulary",
			[]model.Segment{{Seq: a, In: model.Input{IDs: []int{1}}}, {Seq: c, In: model.Input{IDs: []int{ref.Vocab}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.BeginBatch(tc.segs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("BeginBatch: %v, want an error saying %q", err, tc.want)
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
