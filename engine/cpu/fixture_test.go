package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// The fixtures hold transformers' outputs for a float64 run of the same
// weights. An f32 forward pass lands within about 1e-4 of the largest logit
// (fixtures README); 1e-3 leaves room for the accumulation order of longer
// prompts while staying far below what any real mistake produces (a missing
// 1+w, a wrong head mapping or a RoPE pairing error moves logits by 1e-1 or
// more of their scale).
const fixtureTolerance = 1e-3

// reference is one model folder with the transformers outputs for it.
type reference struct {
	name        string
	dir         string // model folder
	prompt      []int
	logits      []float32 // [T, V]
	hidden      []float32 // [L+1, T, H]
	genIDs      []int
	genLogits   []float32 // [N, V]
	vocab, size int
}

// loadReference reads prefix's outputs (hf or mlx) from a reference file.
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
		if tn.DType != safetensors.I32 {
			t.Fatalf("%s: %s is %v, want I32", refPath, name, tn.DType)
		}
		out := make([]int, tn.NumElements())
		for i := range out {
			out[i] = int(int32(binary.LittleEndian.Uint32(tn.Data[4*i:])))
		}
		return out
	}
	r := &reference{
		name:      filepath.Base(modelDir),
		dir:       modelDir,
		prompt:    ints("prompt_ids"),
		logits:    floats(prefix + ".prompt_logits"),
		hidden:    floats(prefix + ".hidden"),
		genIDs:    ints(prefix + ".gen_ids"),
		genLogits: floats(prefix + ".gen_logits"),
	}
	r.vocab = get(prefix + ".prompt_logits").Shape[1]
	r.size = get(prefix + ".hidden").Shape[2]
	return r
}

// fixtureModels lists the reference checkpoints: the shared tiny model and
// the alternative sizes under engine/checkpoint/testdata, both layouts each.
func fixtureModels(t testing.TB) []*reference {
	root := fixtures.ModuleRoot(t)
	var refs []*reference
	for _, base := range []string{
		fixtures.Path(t, "qwen35moe-tiny"),
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
	b, err := New(m.Weights, Options{})
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
	for _, ref := range fixtureModels(t) {
		t.Run(ref.name, func(t *testing.T) { checkReference(t, ref) })
	}
}

// TestFixturesGoKernels runs the same comparison with the assembly kernels
// switched off, so that the Go loops (what arm64 runs) stay verified on
// amd64 too.
func TestFixturesGoKernels(t *testing.T) {
	saved := simd
	simd = simdKernels{}
	defer func() { simd = saved }()
	refs := fixtureModels(t)
	for _, ref := range []*reference{refs[0], refs[3]} {
		t.Run(ref.name, func(t *testing.T) { checkReference(t, ref) })
	}
}

func checkReference(t *testing.T, ref *reference) {
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
	// Per layer first, so a regression names the first layer that drifts.
	H := ref.size
	for l := range res.Hidden {
		want := ref.hidden[l*T*H : (l+1)*T*H]
		if e := fixtures.RelError(res.Hidden[l], want); e > fixtureTolerance || math.IsNaN(e) {
			t.Fatalf("residual stream after layer %d (0: embedding) drifts: relative error %.3g > %g", l, e, fixtureTolerance)
		} else {
			t.Logf("hidden %d: relative error %.2e", l, e)
		}
	}
	e := fixtures.RelError(res.Logits, ref.logits)
	t.Logf("prompt logits [%d, %d]: relative error %.2e", T, ref.vocab, e)
	if e > fixtureTolerance || math.IsNaN(e) {
		t.Fatalf("prompt logits: relative error %.3g > %g", e, fixtureTolerance)
	}

	// Greedy decode through the cache: the first token comes from the
	// prompt pass, each later one from a one-token pass fed the
	// previous choice.
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
	e = fixtures.RelError(genLogits, ref.genLogits)
	t.Logf("generated logits [%d, %d]: relative error %.2e", len(ids), ref.vocab, e)
	if e > fixtureTolerance || math.IsNaN(e) {
		t.Fatalf("generated logits: relative error %.3g > %g", e, fixtureTolerance)
	}
}
