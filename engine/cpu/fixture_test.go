package cpu

import (
	"fmt"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// The fixtures hold transformers' outputs for a float64 run of the same
// weights. This f32 pass lands within 1.4e-5 of the largest value on every
// reference (the worst: qwen35moe-alt/mlx-4bit's prompt logits), so 1e-4
// leaves 7× room, while the smallest of fixtures.Mutations (the DeltaNet
// q/k L2 epsilon 1e-6 → 1e-3) moves the outputs by 3.3e-4 or more. The
// same bar holds it to the float64 reference model on the same weights
// (engine/internal/reference): 1.5e-5 at worst, the same reference's
// prompt logits.
const fixtureTolerance = 1e-4

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

// TestFixturesGoKernels runs the same comparison on the Go loops (the
// backend forced to the generic level), so that what arm64 runs on the
// exact path stays verified on amd64 too.
func TestFixturesGoKernels(t *testing.T) {
	for _, ref := range fixtures.ModelsNamed(t, fixtures.TinyHF, fixtures.AltMLX) {
		t.Run(ref.Name, func(t *testing.T) { checkReference(t, ref, ISAGeneric) })
	}
}

func checkReference(t *testing.T, ref *fixtures.Reference, isa ISA) {
	b, w := openModel(t, ref.Dir, Options{Precision: PrecisionExact, ISA: isa})
	run := runReference(t, b, w, ref)
	// Against transformers' outputs, then against the float64 reference
	// model's on the same weights; each in order, so a regression names the
	// first layer that drifts.
	for _, want := range []*fixtures.Reference{ref, ref.Float64(t, w)} {
		for _, o := range run.compare(want) {
			t.Logf("%s: %s: relative error %.2e", want.Name, o.What, o.Err)
			if !(o.Err <= fixtureTolerance) {
				t.Fatalf("%s: %s drifts: relative error %.3g > %g", want.Name, o.What, o.Err, fixtureTolerance)
			}
		}
		if fmt.Sprint(run.ids) != fmt.Sprint(want.GenIDs) {
			t.Fatalf("%s: greedy continuation\n got %v\nwant %v", want.Name, run.ids, want.GenIDs)
		}
	}
}

// TestFixturesCatchMutations makes each of fixtures.Mutations, a
// one-constant mistake in the model, and checks that the comparison with the
// reference fails at fixtureTolerance: the tolerance is tight enough to
// catch them.
func TestFixturesCatchMutations(t *testing.T) {
	for _, ref := range fixtures.Models(t) {
		for _, mutation := range fixtures.Mutations() {
			t.Run(ref.Name+"/"+mutation.Name, func(t *testing.T) {
				m, err := checkpoint.Load(ref.Dir)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				mutation.Apply(m.Weights)
				b, err := New(m.Weights, Options{Precision: PrecisionExact})
				if err != nil {
					t.Fatal(err)
				}
				worst := fixtures.Worst(runReference(t, b, m.Weights, ref).compare(ref))
				t.Logf("worst: %s, relative error %.2e", worst.What, worst.Err)
				if worst.Err <= fixtureTolerance {
					t.Fatalf("the mutated model passes: worst relative error %.3g (%s) is within the tolerance %g", worst.Err, worst.What, fixtureTolerance)
				}
			})
		}
	}
}

// fixtureRun is a backend's run of a reference prompt and its greedy
// continuation.
type fixtureRun struct {
	hidden            [][]float32
	logits, genLogits []float32
	ids               []int
}

// compare is each output's error against want (Reference.Compare).
func (r *fixtureRun) compare(want *fixtures.Reference) []fixtures.Output {
	return want.Compare(r.hidden, r.logits, r.genLogits)
}

// runReference runs ref's prompt in one pass, then decodes greedily
// through the cache, each step fed the previous choice.
func runReference(t *testing.T, b *Backend, w *model.Weights, ref *fixtures.Reference) *fixtureRun {
	t.Helper()
	T := len(ref.Prompt)
	seq, res := readPrompt(t, b, w, ref, len(ref.GenIDs))
	greedy := &model.Sampling{}
	run := &fixtureRun{hidden: res.Hidden, logits: res.Logits, ids: []int{res.Token}}
	run.genLogits = append([]float32(nil), res.Logits[(T-1)*ref.Vocab:]...)
	for len(run.ids) < len(ref.GenIDs) {
		r, err := model.Run(b, w, seq, model.Input{Logits: model.LogitsLast, Sample: greedy})
		if err != nil {
			t.Fatal(err)
		}
		run.ids = append(run.ids, r.Token)
		run.genLogits = append(run.genLogits, r.Logits...)
	}
	return run
}

// readPrompt reads ref's prompt greedily into a new sequence with room for
// extra more tokens, keeping every layer's hidden states and every row's
// logits.
func readPrompt(t *testing.T, b *Backend, w *model.Weights, ref *fixtures.Reference, extra int) (model.Sequence, model.Result) {
	t.Helper()
	seq, err := b.NewSequence(len(ref.Prompt) + extra)
	if err != nil {
		t.Fatal(err)
	}
	res, err := model.Run(b, w, seq, model.Input{IDs: ref.Prompt, Logits: model.LogitsAll, Sample: &model.Sampling{}, Hidden: true})
	if err != nil {
		t.Fatal(err)
	}
	return seq, res
}
