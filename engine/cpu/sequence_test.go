package cpu

import (
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// prefillPieces feeds ids in pieces of the given sizes (the last piece takes
// the rest) and returns the logits of every position.
func prefillPieces(t *testing.T, b *Backend, w *model.Weights, seq model.Sequence, ids []int, pieces ...int) []float32 {
	var logits []float32
	for len(ids) > 0 {
		n := len(ids)
		if len(pieces) > 0 {
			n, pieces = min(pieces[0], n), pieces[1:]
		}
		res, err := model.Run(b, w, seq, model.Input{IDs: ids[:n], Logits: model.LogitsAll})
		if err != nil {
			t.Fatal(err)
		}
		logits = append(logits, res.Logits...)
		ids = ids[n:]
	}
	return logits
}

// TestPrefillInPieces checks that a prompt fed in pieces (including pieces
// of one and three tokens, which take the matrix-vector path) gives the
// logits of a single pass. The two differ only in f32 rounding order between
// the matrix-vector and matrix-matrix loops: 1e-5 of the largest logit is
// ten times the error either has against the float64 reference.
func TestPrefillInPieces(t *testing.T) {
	for _, ref := range fixtures.ModelsNamed(t, fixtures.TinyHF, fixtures.TinyMLX) {
		t.Run(ref.Name, func(t *testing.T) {
			b, w := openModel(t, ref.Dir, Options{})
			one, _ := b.NewSequence(len(ref.Prompt))
			whole := prefillPieces(t, b, w, one, ref.Prompt)
			split, _ := b.NewSequence(len(ref.Prompt))
			pieces := prefillPieces(t, b, w, split, ref.Prompt, 37, 1, 3, 20)
			if e := fixtures.RelError(pieces, whole); e > 1e-5 || math.IsNaN(e) {
				t.Fatalf("logits of a prompt in pieces differ from one pass: relative error %.3g > 1e-5", e)
			} else {
				t.Logf("relative difference %.2e", e)
			}
			if split.Pos() != len(ref.Prompt) {
				t.Fatalf("sequence at position %d after %d tokens", split.Pos(), len(ref.Prompt))
			}
			// model.Prefill in chunks returns the last row's logits and the
			// greedy choice of the whole prompt.
			chunked, _ := b.NewSequence(len(ref.Prompt))
			res, err := model.Prefill(b, w, chunked, ref.Prompt, 16, model.Input{Logits: model.LogitsLast, Sample: &model.Sampling{}})
			if err != nil {
				t.Fatal(err)
			}
			last := whole[(len(ref.Prompt)-1)*ref.Vocab:]
			if e := fixtures.RelError(res.Logits, last); e > 1e-5 || math.IsNaN(e) {
				t.Fatalf("chunked prefill's last logits differ from one pass: relative error %.3g > 1e-5", e)
			}
			if res.Token != model.ArgMax(last) || chunked.Pos() != len(ref.Prompt) {
				t.Fatalf("chunked prefill chose %d at position %d, want %d at %d", res.Token, chunked.Pos(), model.ArgMax(last), len(ref.Prompt))
			}
		})
	}
}

// TestSnapshotRestore checks that restoring a snapshot gives exactly the
// logits of a sequence that reached the same position from scratch. The
// CPU backend's arithmetic is deterministic (each output is summed by one
// goroutine in a fixed order), so the logits must be bit-identical.
func TestSnapshotRestore(t *testing.T) {
	for _, ref := range fixtures.ModelsNamed(t, fixtures.TinyHF, fixtures.TinyMLX) {
		t.Run(ref.Name, func(t *testing.T) {
			b, w := openModel(t, ref.Dir, Options{})
			head, tail := ref.Prompt[:60], ref.Prompt[60:]

			scratch, _ := b.NewSequence(len(ref.Prompt))
			prefillPieces(t, b, w, scratch, head)
			want := prefillPieces(t, b, w, scratch, tail)

			seq, _ := b.NewSequence(len(ref.Prompt) + 8)
			prefillPieces(t, b, w, seq, head)
			snap, err := seq.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if snap.Pos() != 60 || len(snap.Tokens()) != 60 || snap.Bytes() <= 0 {
				t.Fatalf("snapshot at %d with %d tokens and %d bytes, want position 60", snap.Pos(), len(snap.Tokens()), snap.Bytes())
			}
			// Move the state on (other tokens, then the real tail), then
			// come back twice: the snapshot must stay usable.
			prefillPieces(t, b, w, seq, ref.Prompt[10:18])
			for round := range 2 {
				if err := seq.Restore(snap); err != nil {
					t.Fatal(err)
				}
				if seq.Pos() != 60 {
					t.Fatalf("restored sequence at position %d, want 60", seq.Pos())
				}
				got := prefillPieces(t, b, w, seq, tail)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("round %d: logit %d after restore is %v, from scratch %v", round, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestSnapshotHoldsOnlyTheRowsInUse checks that a snapshot's size, which
// the prefix cache budgets with, is that of the positions consumed and not
// of the sequence's capacity: each attention layer's K and V rows up to Pos,
// the DeltaNet states, and the token list. The sizes are counted from the
// config, not from the snapshot's slices.
func TestSnapshotHoldsOnlyTheRowsInUse(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyHF)
	b, w := openModel(t, ref.Dir, Options{})
	c := &b.cfg
	var attention, deltaNet int
	for _, l := range w.Layers {
		if l.DeltaNet != nil {
			deltaNet++
		} else {
			attention++
		}
	}
	state := int64(4 * ((c.ConvKernel-1)*deltaNetChannels(c) + c.LinearValueHeads*c.LinearKeyHeadDim*c.LinearValueHeadDim))
	want := func(pos int) int64 {
		return int64(8*pos) + int64(attention)*int64(2*4*pos*c.NumKVHeads*c.HeadDim) + int64(deltaNet)*state
	}
	// Capacity far past the prompt: a snapshot that copied the capacity
	// would be several times the expected size.
	seq, _ := b.NewSequence(8 * len(ref.Prompt))
	prefillPieces(t, b, w, seq, ref.Prompt[:60])
	early, err := seq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	prefillPieces(t, b, w, seq, ref.Prompt[60:])
	late, err := seq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []model.Snapshot{early, late} {
		if s.Bytes() != want(s.Pos()) {
			t.Errorf("snapshot at position %d holds %d bytes, want %d", s.Pos(), s.Bytes(), want(s.Pos()))
		}
	}
	// A restored sequence carries only the snapshot's rows too.
	if err := seq.Restore(early); err != nil {
		t.Fatal(err)
	}
	again, err := seq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if again.Pos() != 60 || again.Bytes() != want(60) {
		t.Errorf("after restoring position 60, a snapshot is at %d with %d bytes, want %d", again.Pos(), again.Bytes(), want(60))
	}
}

// TestSequenceErrors checks the misuse a caller can run into.
func TestSequenceErrors(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyMLX)
	b, w := openModel(t, ref.Dir, Options{})
	seq, _ := b.NewSequence(4)
	if _, err := model.Run(b, w, seq, model.Input{Sample: &model.Sampling{}}); err == nil {
		t.Error("a pass without ids on a fresh sequence was accepted")
	}
	if _, err := model.Run(b, w, seq, model.Input{IDs: []int{1, 2, 3, 4, 5}}); err == nil {
		t.Error("a pass past the sequence's capacity was accepted")
	}
	if _, err := model.Run(b, w, seq, model.Input{IDs: []int{w.Embed.Out}}); err == nil {
		t.Error("a token id outside the vocabulary was accepted")
	}
	if _, err := model.Run(b, w, seq, model.Input{IDs: []int{1}, Sample: &model.Sampling{Temperature: 1}}); err == nil {
		t.Error("sampling with temperature on a backend without a sampler was accepted")
	}
	if seq.Pos() != 0 {
		t.Errorf("refused passes moved the sequence to position %d", seq.Pos())
	}
	other, _ := New(w, Options{})
	snap, _ := seq.Snapshot()
	seq2, _ := other.NewSequence(4)
	if err := seq2.Restore(snap); err == nil {
		t.Error("a snapshot of another backend was restored")
	}
}

// TestNewRejectsBadShapes checks that weights whose shapes disagree with
// their config never reach the kernels.
func TestNewRejectsBadShapes(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyMLX)
	_, w := openModel(t, ref.Dir, Options{})
	bad := *w
	bad.Layers = append([]model.Layer(nil), w.Layers...)
	moe := bad.Layers[0].MoE
	moe.Down = append(model.Experts(nil), moe.Down...)
	moe.Down[3] = moe.Gate[3] // a valid matrix of the transposed shape
	bad.Layers[0].MoE = moe
	if _, err := New(&bad, Options{}); err == nil {
		t.Fatal("an expert down projection of the wrong shape was accepted")
	} else {
		t.Log(err)
	}
	bad = *w
	bad.FinalNorm = w.FinalNorm[:3]
	if _, err := New(&bad, Options{}); err == nil {
		t.Fatal("a final norm of the wrong length was accepted")
	}
}
