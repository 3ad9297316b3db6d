package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// The fixtures hold transformers' outputs for a float64 run of the same
// weights. The GPU path keeps activations in f32 but stores the KV cache in
// bf16 (as the real model runs), which moves logits by up to about 1e-3 of
// their scale on these prompts; 2e-2, the bound for bf16 operands,
// is the limit, and greedy ids must match exactly (the fixtures' smallest
// greedy gap is 2e-2 of the logit scale or more).
const fixtureTolerance = 2e-2

type reference struct {
	name      string
	dir       string
	prompt    []int
	logits    []float32 // [T, V]
	hidden    []float32 // [L+1, T, H]
	genIDs    []int
	genLogits []float32 // [N, V]
	vocab     int
	size      int
}

func loadReference(t testing.TB, refPath, modelDir, prefix string) *reference {
	f, err := safetensors.Open(refPath)
	if err != nil {
		t.Fatalf("reference outputs: %v", err)
	}
	defer f.Close()
	get := func(name string) safetensors.Tensor {
		tn, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("%s: no tensor %s", refPath, name)
		}
		return tn
	}
	floats := func(name string) []float32 {
		v, err := safetensors.ToFloat32(get(name))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ints := func(name string) []int {
		tn := get(name)
		out := make([]int, tn.NumElements())
		for i := range out {
			out[i] = int(int32(binary.LittleEndian.Uint32(tn.Data[4*i:])))
		}
		return out
	}
	r := &reference{dir: modelDir, prompt: ints("prompt_ids"), logits: floats(prefix + ".prompt_logits"),
		hidden: floats(prefix + ".hidden"), genIDs: ints(prefix + ".gen_ids"), genLogits: floats(prefix + ".gen_logits")}
	r.vocab = get(prefix + ".prompt_logits").Shape[1]
	r.size = get(prefix + ".hidden").Shape[2]
	return r
}

// fixtureModels lists the shared tiny model and the alternative sizes under
// engine/checkpoint/testdata, both layouts each.
func fixtureModels(t testing.TB) []*reference {
	root := moduleRoot(t)
	var refs []*reference
	for _, base := range []string{
		filepath.Join(root, "..", "shared", "fixtures", "qwen35moe-tiny"),
		filepath.Join(root, "engine", "checkpoint", "testdata", "qwen35moe-alt"),
	} {
		for _, layout := range []struct{ dir, prefix string }{{"hf-bf16", "hf"}, {"mlx-4bit", "mlx"}} {
			r := loadReference(t, filepath.Join(base, "reference.safetensors"), filepath.Join(base, layout.dir), layout.prefix)
			r.name = filepath.Base(base) + "/" + layout.dir
			refs = append(refs, r)
		}
	}
	return refs
}

func openModel(t testing.TB, dir string) (*Backend, *model.Weights) {
	m, err := checkpoint.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := New(openTestDevice(t, 0), m.Weights, Options{KVCacheF32: true})
	if err != nil {
		t.Fatal(err)
	}
	return b, m.Weights
}

// relError is max|got−want| / max|want|.
func relError(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var maxDiff, maxRef float64
	for i := range want {
		maxDiff = max(maxDiff, math.Abs(float64(got[i])-float64(want[i])))
		maxRef = max(maxRef, math.Abs(float64(want[i])))
	}
	return maxDiff / maxRef
}

// TestFixtures runs each reference prompt as one prefill pass, compares the
// residual stream after every layer and the logits at every position, then
// decodes greedily with the token fed back on the device and compares the
// ids and the logits that chose them.
func TestFixtures(t *testing.T) {
	for _, ref := range fixtureModels(t) {
		t.Run(ref.name, func(t *testing.T) {
			b, w := openModel(t, ref.dir)
			T := len(ref.prompt)
			seq, err := b.NewSequence(T + len(ref.genIDs))
			if err != nil {
				t.Fatal(err)
			}
			greedy := &model.Sampling{}
			res, err := model.Run(b, w, seq, model.Input{IDs: ref.prompt, Logits: model.LogitsAll, Sample: greedy, Hidden: true})
			if err != nil {
				t.Fatal(err)
			}
			H := ref.size
			for l := range res.Hidden {
				want := ref.hidden[l*T*H : (l+1)*T*H]
				e := relError(res.Hidden[l], want)
				t.Logf("hidden %d: relative error %.2e", l, e)
				if e > fixtureTolerance || math.IsNaN(e) {
					t.Fatalf("residual stream after layer %d (0: embedding) drifts: relative error %.3g > %g", l, e, fixtureTolerance)
				}
			}
			e := relError(res.Logits, ref.logits)
			t.Logf("prompt logits [%d, %d]: relative error %.2e", T, ref.vocab, e)
			if e > fixtureTolerance || math.IsNaN(e) {
				t.Fatalf("prompt logits: relative error %.3g > %g", e, fixtureTolerance)
			}
			ids := []int{res.Token}
			genLogits := append([]float32(nil), res.Logits[(T-1)*ref.vocab:]...)
			for len(ids) < len(ref.genIDs) {
				r, err := model.Run(b, w, seq, model.Input{Logits: model.LogitsLast, Sample: greedy})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.Token)
				genLogits = append(genLogits, r.Logits...)
			}
			if fmt.Sprint(ids) != fmt.Sprint(ref.genIDs) {
				t.Fatalf("greedy continuation\n got %v\nwant %v", ids, ref.genIDs)
			}
			e = relError(genLogits, ref.genLogits)
			t.Logf("generated logits [%d, %d]: relative error %.2e", len(ids), ref.vocab, e)
			if e > fixtureTolerance || math.IsNaN(e) {
				t.Fatalf("generated logits: relative error %.3g > %g", e, fixtureTolerance)
			}
		})
	}
}
