package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// The fixtures hold transformers' outputs for a float64 run of the same
// weights. An f32 forward pass lands within about 1e-4 of the largest logit
// (fixtures README); 1e-3 leaves room for the accumulation order of longer
// prompts while staying far below what any real mistake produces (a missing
// 1+w, a wrong head mapping or a RoPE pairing error moves logits by 1e-1 or
// more of their scale).
const fixtureTolerance = 1e-3

func openModel(t testing.TB, dir string, opt Options) (*Backend, *model.Weights) {
	m, err := checkpoint.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := New(m.Weights, opt)
	if err != nil {
		t.Fatal(err)
	}
	return b, m.Weights
}

// TestFixtures runs each reference checkpoint's prompt in one pass and
// compares the logits at every position and the residual stream after
// every layer, then decodes greedily through the cache and compares the
// generated ids and the logits that chose them.
func TestFixtures(t *testing.T) {
	for _, ref := range fixtures.Models(t) {
		t.Run(ref.Name, func(t *testing.T) { checkReference(t, ref, ISAAuto) })
	}
}

// TestFixturesGoKernels runs the same comparison with the assembly kernels
// switched off (the generic ISA for the matrix products, the package's
// table for the other helpers), so that the Go loops (what arm64 runs
// without sdot) stay verified on amd64 too.
func TestFixturesGoKernels(t *testing.T) {
	saved := simd
	simd = simdKernels{}
	defer func() { simd = saved }()
	refs := fixtures.Models(t)
	for _, ref := range []*fixtures.Reference{refs[0], refs[3]} {
		t.Run(ref.Name, func(t *testing.T) { checkReference(t, ref, ISAGeneric) })
	}
}

func checkReference(t *testing.T, ref *fixtures.Reference, isa ISA) {
	b, w := openModel(t, ref.Dir, Options{Precision: PrecisionExact, ISA: isa})
	T := len(ref.Prompt)
	seq, err := b.NewSequence(T + len(ref.GenIDs))
	if err != nil {
		t.Fatal(err)
	}
	greedy := &model.Sampling{}
	res, err := model.Run(b, w, seq, model.Input{IDs: ref.Prompt, Logits: model.LogitsAll, Sample: greedy, Hidden: true})
	if err != nil {
		t.Fatal(err)
	}
	// Per layer first, so a regression names the first layer that drifts.
	H := ref.Size
	for l := range res.Hidden {
		want := ref.Hidden[l*T*H : (l+1)*T*H]
		if e := fixtures.RelError(res.Hidden[l], want); e > fixtureTolerance || math.IsNaN(e) {
			t.Fatalf("residual stream after layer %d (0: embedding) drifts: relative error %.3g > %g", l, e, fixtureTolerance)
		} else {
			t.Logf("hidden %d: relative error %.2e", l, e)
		}
	}
	e := fixtures.RelError(res.Logits, ref.Logits)
	t.Logf("prompt logits [%d, %d]: relative error %.2e", T, ref.Vocab, e)
	if e > fixtureTolerance || math.IsNaN(e) {
		t.Fatalf("prompt logits: relative error %.3g > %g", e, fixtureTolerance)
	}

	// Greedy decode through the cache: the first token comes from the
	// prompt pass, each later one from a one-token pass fed the
	// previous choice.
	ids := []int{res.Token}
	genLogits := append([]float32(nil), res.Logits[(T-1)*ref.Vocab:]...)
	for len(ids) < len(ref.GenIDs) {
		r, err := model.Run(b, w, seq, model.Input{Logits: model.LogitsLast, Sample: greedy})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Token)
		genLogits = append(genLogits, r.Logits...)
	}
	if fmt.Sprint(ids) != fmt.Sprint(ref.GenIDs) {
		t.Fatalf("greedy continuation\n got %v\nwant %v", ids, ref.GenIDs)
	}
	e = fixtures.RelError(genLogits, ref.GenLogits)
	t.Logf("generated logits [%d, %d]: relative error %.2e", len(ids), ref.Vocab, e)
	if e > fixtureTolerance || math.IsNaN(e) {
		t.Fatalf("generated logits: relative error %.3g > %g", e, fixtureTolerance)
	}
}
