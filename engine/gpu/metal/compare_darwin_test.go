//go:build darwin

package metal

import (
	"path/filepath"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpu"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/logits"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// runGPU computes the prompt's logits and a greedy continuation with the
// GPU backend on dev.
func runGPU(t *testing.T, dev device.Device, m *checkpoint.Model, prompt []int, gen int) *logits.Output {
	t.Helper()
	b, err := gpu.New(dev, m.Weights, gpu.Options{})
	if err != nil {
		t.Fatalf("%s: %v", dev.Name(), err)
	}
	defer b.Close()
	return runBackend(t, b, m, prompt, gen)
}

func runBackend(t *testing.T, b model.Backend, m *checkpoint.Model, prompt []int, gen int) *logits.Output {
	t.Helper()
	out, err := logits.Compute(b, m.Weights, prompt, gen)
	if err != nil {
		t.Fatalf("%s: %v", b.Name(), err)
	}
	return out
}

// TestMetalMatchesEmuAndReference runs the GPU backend on the real GPU and
// on the emulator over the tiny fixture model in both layouts, and checks
// Metal against transformers' reference and against the emulator.
//
// The emulator needs a C++ compiler (the Xcode command line tools' clang);
// without one, Metal is compared with the CPU backend instead, and the test
// says so.
//
// Tolerance: 2e-2 of the largest logit magnitude, the bound the GPU
// pipeline promises with bf16 operands (its KV cache is bf16); the two
// devices run the same kernels, so they differ only by the GPU's summation
// order and fused multiply-adds (Metal compiles with fast math), far
// inside it. The greedy continuation must be the reference's wherever the
// reference's top two logits are further apart than the tolerance lets
// them move (fixtures.CheckGreedy): on the random-weight fixture a near-tie
// may break either way.
func TestMetalMatchesEmuAndReference(t *testing.T) {
	tiny := fixtures.Path(t, "qwen35moe-tiny")
	refPath := filepath.Join(tiny, "reference.safetensors")
	refs := []*fixtures.Reference{
		fixtures.LoadReference(t, refPath, filepath.Join(tiny, "hf-bf16"), "hf"),
		fixtures.LoadReference(t, refPath, filepath.Join(tiny, "mlx-4bit"), "mlx"),
	}

	mtl, err := NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer mtl.Close()
	requireSupportedGPU(t, mtl)
	// other runs the same model on the emulator, or on the CPU backend
	// when the emulator cannot be built here.
	var other func(m *checkpoint.Model, prompt []int, gen int) *logits.Output
	otherName := "emu"
	if em, err := emu.New(emu.Options{}); err == nil {
		defer em.Close()
		other = func(m *checkpoint.Model, prompt []int, gen int) *logits.Output { return runGPU(t, em, m, prompt, gen) }
	} else {
		t.Logf("no emulator here (%v): comparing Metal with the CPU backend instead", err)
		otherName = "cpu"
		other = func(m *checkpoint.Model, prompt []int, gen int) *logits.Output {
			b, err := cpu.New(m.Weights, cpu.Options{Sampler: sample.New(), Precision: cpu.PrecisionExact})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			return runBackend(t, b, m, prompt, gen)
		}
	}

	const tol = 2e-2
	for _, ref := range refs {
		// ref.Name is the layout's folder: hf-bf16, mlx-4bit.
		t.Run(ref.Name, func(t *testing.T) {
			m, err := checkpoint.Load(ref.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			wantGen, wantLogits := ref.GenIDs, ref.Logits

			onMetal := runGPU(t, mtl, m, ref.Prompt, len(wantGen))
			onOther := other(m, ref.Prompt, len(wantGen))

			if e := fixtures.RelError(onMetal.PromptLogits, wantLogits); !(e <= tol) {
				t.Errorf("metal prompt logits vs reference: relative error %.3g, want ≤ %g", e, tol)
			}
			if e := fixtures.RelError(onMetal.PromptLogits, onOther.PromptLogits); !(e <= tol) {
				t.Errorf("metal prompt logits vs %s: relative error %.3g, want ≤ %g", otherName, e, tol)
			}
			if e := fixtures.RelError(onMetal.GenLogits, onOther.GenLogits); !(e <= tol) {
				t.Errorf("metal decode logits vs %s: relative error %.3g, want ≤ %g", otherName, e, tol)
			}
			if err := fixtures.CheckGreedy(onMetal.GenIDs, wantGen, ref.GenLogits, ref.Vocab, tol); err != nil {
				t.Fatalf("metal: %v (%s %v)", err, otherName, onOther.GenIDs)
			}
			t.Logf("%s: metal vs reference %.3g, metal vs %s %.3g (prompt), %.3g (decode)", ref.Name,
				fixtures.RelError(onMetal.PromptLogits, wantLogits), otherName, fixtures.RelError(onMetal.PromptLogits, onOther.PromptLogits),
				fixtures.RelError(onMetal.GenLogits, onOther.GenLogits))
		})
	}
}
