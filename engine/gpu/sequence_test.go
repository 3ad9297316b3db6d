package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// TestSnapshotRestore prefills part of the prompt, snapshots, runs on, then
// restores and runs the same steps again: the logits must be bit-identical
// (the state, KV cache, token ring and history all come back), and the
// snapshot's tokens must be the ids consumed so far.
func TestSnapshotRestore(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyHF)
	b, w := openModel(t, ref.Dir, Options{})
	seq, err := b.NewSequence(len(ref.Prompt) + 8)
	if err != nil {
		t.Fatal(err)
	}
	greedy := &model.Sampling{}
	half := len(ref.Prompt) / 2
	if _, err := model.Run(b, w, seq, model.Input{IDs: ref.Prompt[:half], Sample: greedy}); err != nil {
		t.Fatal(err)
	}
	// One device-fed step before the snapshot, so the ring slot and the
	// history written on the device are part of what must come back.
	if _, err := model.Run(b, w, seq, model.Input{Sample: greedy}); err != nil {
		t.Fatal(err)
	}
	snap, err := seq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Pos() != half+1 {
		t.Fatalf("snapshot at %d, want %d", snap.Pos(), half+1)
	}
	run := func() ([]float32, []int) {
		var logits []float32
		var ids []int
		for i := 0; i < 3; i++ {
			r, err := model.Run(b, w, seq, model.Input{Logits: model.LogitsLast, Sample: greedy})
			if err != nil {
				t.Fatal(err)
			}
			logits = append(logits, r.Logits...)
			ids = append(ids, r.Token)
		}
		r, err := model.Run(b, w, seq, model.Input{IDs: ref.Prompt[half : half+5], Logits: model.LogitsAll})
		if err != nil {
			t.Fatal(err)
		}
		return append(logits, r.Logits...), ids
	}
	l1, ids1 := run()
	if err := seq.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if seq.Pos() != half+1 {
		t.Fatalf("restored position %d, want %d", seq.Pos(), half+1)
	}
	l2, ids2 := run()
	if fmt.Sprint(ids1) != fmt.Sprint(ids2) {
		t.Fatalf("tokens after restore %v, before %v", ids2, ids1)
	}
	for i := range l1 {
		if l1[i] != l2[i] {
			t.Fatalf("logit %d after restore %v, before %v", i, l2[i], l1[i])
		}
	}
	// The same snapshot restores into a new sequence of another capacity:
	// only the cache rows in use were saved.
	other, err := b.NewSequence(len(ref.Prompt) + 40)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Restore(snap); err != nil {
		t.Fatal(err)
	}
	seq = other
	l3, ids3 := run()
	if fmt.Sprint(ids3) != fmt.Sprint(ids1) {
		t.Fatalf("tokens in a larger restored sequence %v, before %v", ids3, ids1)
	}
	for i := range l1 {
		if l1[i] != l3[i] {
			t.Fatalf("logit %d in a larger restored sequence %v, before %v", i, l3[i], l1[i])
		}
	}
	toks := snap.Tokens()
	if fmt.Sprint(toks[:half]) != fmt.Sprint(ref.Prompt[:half]) || len(toks) != half+1 || toks[half] < 0 {
		t.Fatalf("snapshot tokens %v: want the prompt's first %d then the sampled id", toks, half)
	}
}

// TestSplitWeights wraps the checkpoint in buffers no longer than a small
// maximum, as on a device whose buffers are shorter than the file, and
// checks that the model still reproduces the reference.
func TestSplitWeights(t *testing.T) {
	for _, c := range []struct {
		ref    *fixtures.Reference
		maxLen int
	}{{fixtures.Model(t, fixtures.TinyHF), 1 << 20}, {fixtures.Model(t, fixtures.TinyMLX), 512 << 10}} {
		t.Run(c.ref.Name, func(t *testing.T) {
			m, err := checkpoint.Load(c.ref.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			dev, err := emu.New(emu.Options{MaxBufferLength: c.maxLen})
			if err != nil {
				t.Fatal(err)
			}
			// f32 GEMM operands: the path is f32 throughout, so any
			// mistake in the split mapping shows against fixtureTolerance.
			b, err := New(dev, m.Weights, Options{KVCacheF32: true, OwnDevice: true, GEMMOperands: FloatOperands})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if n := len(b.wm.regions); n < 2 {
				t.Fatalf("weights in %d buffer(s) under a %d-byte limit: the test does not split", n, c.maxLen)
			} else {
				t.Logf("%d-byte limit: weights in %d buffers", c.maxLen, n)
			}
			for _, r := range b.wm.regions {
				if int(r.end-r.start) > c.maxLen || r.start%pageSize != 0 {
					t.Fatalf("wrapped region [%#x, %#x) breaks the limit or page alignment", r.start, r.end)
				}
			}
			seq, err := b.NewSequence(len(c.ref.Prompt))
			if err != nil {
				t.Fatal(err)
			}
			res, err := model.Run(b, m.Weights, seq, model.Input{IDs: c.ref.Prompt, Logits: model.LogitsAll, Sample: &model.Sampling{}})
			if err != nil {
				t.Fatal(err)
			}
			if e := fixtures.RelError(res.Logits, c.ref.Logits); !(e <= fixtureTolerance) {
				t.Fatalf("prompt logits: relative error %.3g > %g", e, fixtureTolerance)
			}
			if err := fixtures.CheckGreedy([]int{res.Token}, c.ref.GenIDs[:1], c.ref.GenLogits, c.ref.Vocab, fixtureTolerance); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFiberOrderEndToEnd runs a chunked prefill and a few decode steps of
// the tiny model under two shuffled fiber orders: every logit must have the
// same bits, which a missing barrier anywhere in the pipeline would break.
func TestFiberOrderEndToEnd(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyMLX)
	m, err := checkpoint.Load(ref.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	run := func(seed uint64) []float32 {
		b, err := New(openTestDevice(t, seed), m.Weights, Options{})
		if err != nil {
			t.Fatal(err)
		}
		seq, err := b.NewSequence(len(ref.Prompt) + 4)
		if err != nil {
			t.Fatal(err)
		}
		greedy := &model.Sampling{}
		var logits []float32
		for start := 0; start < len(ref.Prompt); start += prefillChunk {
			end := min(start+prefillChunk, len(ref.Prompt))
			in := model.Input{IDs: ref.Prompt[start:end], Logits: model.LogitsAll}
			if end == len(ref.Prompt) {
				in.Sample = greedy
			}
			r, err := model.Run(b, m.Weights, seq, in)
			if err != nil {
				t.Fatal(err)
			}
			logits = append(logits, r.Logits...)
		}
		for i := 0; i < 3; i++ {
			r, err := model.Run(b, m.Weights, seq, model.Input{Logits: model.LogitsLast, Sample: greedy})
			if err != nil {
				t.Fatal(err)
			}
			logits = append(logits, r.Logits...)
		}
		return logits
	}
	a, b := run(3), run(0xdeadbeef)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("logit %d differs between fiber orders: %v, %v", i, a[i], b[i])
		}
	}
}

// TestSequenceBytes checks SequenceBytes, which the scheduler budgets
// sequences by, against the buffers a new sequence actually holds, for both
// cache element types and two capacities.
func TestSequenceBytes(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyMLX)
	for _, f32 := range []bool{false, true} {
		b, _ := openModel(t, ref.Dir, Options{KVCacheF32: f32})
		for _, tokens := range []int{1, 300} {
			s, err := b.NewSequence(tokens)
			if err != nil {
				t.Fatal(err)
			}
			var held int64
			for _, buf := range s.(*sequence).buffers() {
				held += int64(buf.Len())
			}
			if got := b.SequenceBytes(tokens); got != held {
				t.Errorf("f32 cache %v, %d tokens: SequenceBytes %d, the sequence holds %d", f32, tokens, got, held)
			}
			s.Close()
		}
	}
}
