package gpu

import (
	"fmt"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/batchtest"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// TestBatchMatchesAlone checks the batched pass's contract on the GPU path
// (emu) with batchtest's plans: a sequence's tokens and logits are those
// of the same sequence run alone, whatever else is in the batch. Four
// sequences join at different steps with different prompts, so batches mix
// decode steps at different positions with prefill chunks long enough for
// the GEMM and the grouped expert GEMMs (12 rows) and short ones (2, 3 and
// 8 rows, which join the decode rows in the GEMV and the grouped expert
// decode). Tolerance: none — the logits must be the same bits — since
// every kernel forms a row's sums the same way whatever rows share its
// dispatch; that is stronger than the half-operand tolerance the issue
// allows, and it is what makes greedy output independent of the batch.
// Each batched step is one pass in one command buffer.
func TestBatchMatchesAlone(t *testing.T) {
	for _, ref := range fixtures.ModelsNamed(t, fixtures.TinyHF, fixtures.TinyMLX) {
		t.Run(ref.Name, func(t *testing.T) {
			b, w := openModel(t, ref.Dir, Options{})
			plans := batchtest.Plans()
			alone := batchtest.Alone(t, b, w, plans)
			before := b.Stats()
			steps := batchtest.Together(t, b, w, plans, alone)
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
	ref := fixtures.Model(t, fixtures.TinyMLX)
	b, w := openModel(t, ref.Dir, Options{})
	const steps = 6
	prompts := [][]int{batchtest.Prompt(5, 3), batchtest.Prompt(6, 11), batchtest.Prompt(7, 1), batchtest.Prompt(8, 6)}
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
		var next model.Pass
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

// TestBatchRefuses checks what a batch may not hold (batchtest.Refuses):
// a refused batch leaves nothing recording and no sequence moved.
func TestBatchRefuses(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyMLX)
	b, w := openModel(t, ref.Dir, Options{})
	batchtest.Refuses(t, b, w)
}
