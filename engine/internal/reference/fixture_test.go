package reference_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/internal/reference"
	"github.com/suzuran-app/suzuran/engine/model"
)

// The fixtures hold transformers' outputs in f32, from a run with float64
// weights whose norms, DeltaNet scan (chunked), attention softmax and
// router softmax transformers computes in float32. This model is float64
// throughout, so it cannot land within the 6e-8 that the f32 storage
// alone would allow: measured, 1.5e-6 (qwen35moe-tiny/hf-bf16) to 1.2e-5
// (qwen35moe-alt/hf-bf16, the residual stream after its last layer) of the
// largest value. Most rows agree to the storage's 6e-8; the rest are rows
// where transformers' f32 parts round, which the random models amplify
// layer by layer. 5e-5 leaves 4× room, while the smallest of
// fixtures.Mutations (the DeltaNet q/k L2 epsilon) moves the tiny model's
// outputs by 4.3e-4 or more.
const fixtureTolerance = 5e-5

func load(t *testing.T, dir string) *model.Weights {
	t.Helper()
	m, err := checkpoint.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m.Weights
}

// run runs ref's prompt in one pass through the reference backend, then
// decodes greedily, each step fed the previous choice, as the backends'
// fixture tests do. It returns the hidden states, the prompt logits, the
// logits that chose each generated token, and the generated ids.
func run(t *testing.T, w *model.Weights, ref *fixtures.Reference) (hidden [][]float32, logits, genLogits []float32, ids []int) {
	t.Helper()
	b := reference.New(w, nil)
	seq, err := b.NewSequence(len(ref.Prompt) + len(ref.GenIDs))
	if err != nil {
		t.Fatal(err)
	}
	greedy := &model.Sampling{}
	res, err := model.Run(b, w, seq, model.Input{IDs: ref.Prompt, Logits: model.LogitsAll, Sample: greedy, Hidden: true})
	if err != nil {
		t.Fatal(err)
	}
	ids = []int{res.Token}
	genLogits = append([]float32(nil), res.Logits[(len(ref.Prompt)-1)*ref.Vocab:]...)
	for len(ids) < len(ref.GenIDs) {
		r, err := model.Run(b, w, seq, model.Input{Logits: model.LogitsLast, Sample: greedy})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Token)
		genLogits = append(genLogits, r.Logits...)
	}
	return res.Hidden, res.Logits, genLogits, ids
}

// TestFixtures runs the reference backend on every reference checkpoint
// through model.Run, the way the CPU backend's fixture test runs it, and
// compares the residual stream after every layer, the prompt logits and the
// logits of the greedy continuation with transformers' (fixtureTolerance),
// and the generated ids exactly. It also requires Forward, the model
// composed without the block interface (fixtures.Reference.Float64 runs
// it), to give the same bits as the backend.
func TestFixtures(t *testing.T) {
	for _, ref := range fixtures.Models(t) {
		t.Run(ref.Name, func(t *testing.T) {
			w := load(t, ref.Dir)
			hidden, logits, genLogits, ids := run(t, w, ref)
			for _, o := range ref.Compare(hidden, logits, genLogits) {
				t.Logf("%s: relative error %.2e", o.What, o.Err)
				if !(o.Err <= fixtureTolerance) {
					t.Fatalf("%s drifts: relative error %.3g > %g", o.What, o.Err, fixtureTolerance)
				}
			}
			if fmt.Sprint(ids) != fmt.Sprint(ref.GenIDs) {
				t.Fatalf("greedy continuation\n got %v\nwant %v", ids, ref.GenIDs)
			}
			forward := ref.Float64(t, w)
			if fmt.Sprint(forward.GenIDs) != fmt.Sprint(ids) {
				t.Fatalf("Forward continues %v, the backend %v", forward.GenIDs, ids)
			}
			for _, o := range forward.Compare(hidden, logits, genLogits) {
				if o.Err != 0 {
					t.Fatalf("%s: the backend differs from Forward by %.3g", o.What, o.Err)
				}
			}
		})
	}
}

// TestFixturesCatchMutations makes each of fixtures.Mutations, a
// one-constant mistake in the model, and checks that the reference model
// then fails the comparison at fixtureTolerance: the model reads the
// constants the mutations change, and the tolerance is tight enough. The
// tiny model in both layouts: the alternative sizes add time, not cases
// (the CPU backend's test runs the mutations on them).
func TestFixturesCatchMutations(t *testing.T) {
	for _, ref := range fixtures.ModelsNamed(t, fixtures.TinyHF, fixtures.TinyMLX) {
		for _, mutation := range fixtures.Mutations() {
			t.Run(ref.Name+"/"+mutation.Name, func(t *testing.T) {
				w := load(t, ref.Dir)
				mutation.Apply(w)
				f := ref.Float64(t, w)
				outputs := ref.Compare(splitLayers(f), f.Logits, f.GenLogits)
				worst := fixtures.Worst(outputs)
				t.Logf("worst: %s, relative error %.2e", worst.What, worst.Err)
				if worst.Err <= fixtureTolerance {
					t.Fatalf("the mutated model passes: worst relative error %.3g (%s) is within the tolerance %g", worst.Err, worst.What, fixtureTolerance)
				}
			})
		}
	}
}

// splitLayers cuts a Reference's hidden states into one block per layer.
func splitLayers(r *fixtures.Reference) [][]float32 {
	n := len(r.Prompt) * r.Size
	var out [][]float32
	for l := 0; l < len(r.Hidden); l += n {
		out = append(out, r.Hidden[l:l+n])
	}
	return out
}

// TestSampledDecode checks the reference backend's sample block with a
// sampler: it is handed the last row's logits, the parameters, and the
// sequence's whole history, prompt and generated; without a sampler a
// non-greedy pass fails with an error saying so.
func TestSampledDecode(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyHF)
	w := load(t, ref.Dir)
	s := &model.Sampling{Temperature: 1, Seed: 7}
	rec := &recorder{}
	b := reference.New(w, rec)
	seq, err := b.NewSequence(len(ref.Prompt) + 2)
	if err != nil {
		t.Fatal(err)
	}
	prompt := ref.Prompt[:5]
	first, err := model.Run(b, w, seq, model.Input{IDs: prompt, Logits: model.LogitsLast, Sample: s})
	if err != nil {
		t.Fatal(err)
	}
	second, err := model.Run(b, w, seq, model.Input{Sample: s})
	if err != nil {
		t.Fatal(err)
	}
	if first.Token != 3 || second.Token != 3 || fmt.Sprint(rec.histories) != fmt.Sprint([][]int{prompt, append(prompt[:5:5], 3)}) {
		t.Fatalf("tokens %d, %d; histories %v", first.Token, second.Token, rec.histories)
	}
	if math.Float32bits(rec.logits[0][0]) != math.Float32bits(first.Logits[0]) || len(rec.logits[0]) != ref.Vocab {
		t.Fatalf("the sampler saw %d logits starting %v, the pass returned %v", len(rec.logits[0]), rec.logits[0][:1], first.Logits[:1])
	}
	seq2, _ := reference.New(w, nil).NewSequence(8)
	if _, err := model.Run(reference.New(w, nil), w, seq2, model.Input{IDs: prompt, Sample: s}); err == nil {
		t.Fatal("a sampled pass without a sampler succeeded")
	}
}

// recorder is a sampler that keeps what it is given and always picks 3.
type recorder struct {
	histories [][]int
	logits    [][]float32
}

func (r *recorder) Sample(logits []float32, s *model.Sampling, history []int) int {
	r.histories = append(r.histories, append([]int(nil), history...))
	r.logits = append(r.logits, append([]float32(nil), logits...))
	return 3
}
