package logits

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// tolerance: an f32 pass lands within about 1e-5 of the float64 reference's
// largest logit on these models; 1e-3 (the bound) is far below the
// 1e-1 that a real mistake (a missing 1+w, a wrong head mapping) causes.
const tolerance = 1e-3

type file struct {
	t *testing.T
	f *safetensors.File
}

func open(t *testing.T, path string) file {
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return file{t, f}
}

func (f file) floats(name string) []float32 {
	tn, ok := f.f.Tensor(name)
	if !ok {
		f.t.Fatalf("%s: no tensor %s", f.f.Path, name)
	}
	v, err := safetensors.ToFloat32(tn)
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

func (f file) ints(name string) []int {
	tn, ok := f.f.Tensor(name)
	if !ok || tn.DType != safetensors.I32 {
		f.t.Fatalf("%s: no I32 tensor %s", f.f.Path, name)
	}
	out := make([]int, tn.NumElements())
	for i := range out {
		out[i] = int(int32(binary.LittleEndian.Uint32(tn.Data[4*i:])))
	}
	return out
}

// TestReferences runs the logits path on the CPU backend for the tiny
// fixture model and the alternative-size checkpoint (300-token prompt;
// other head counts, GQA ratio, key and value head dims that differ),
// both layouts, writes the file, reads it back and compares it with
// transformers' outputs.
func TestReferences(t *testing.T) {
	root := fixtures.ModuleRoot(t)
	for _, base := range []string{
		fixtures.Path(t, "qwen35moe-tiny"),
		filepath.Join(root, "engine", "checkpoint", "testdata", "qwen35moe-alt"),
	} {
		ref := open(t, filepath.Join(base, "reference.safetensors"))
		for _, layout := range []struct{ dir, prefix string }{{"hf-bf16", "hf"}, {"mlx-4bit", "mlx"}} {
			t.Run(filepath.Base(base)+"/"+layout.dir, func(t *testing.T) {
				m, err := checkpoint.Load(filepath.Join(base, layout.dir))
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				b, err := cpu.New(m.Weights, cpu.Options{Precision: cpu.PrecisionExact}) // the reference path
				if err != nil {
					t.Fatal(err)
				}
				prompt := ref.ints("prompt_ids")
				wantIDs := ref.ints(layout.prefix + ".gen_ids")
				res, err := Compute(b, m.Weights, prompt, len(wantIDs))
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "logits.safetensors")
				if err := res.Write(path); err != nil {
					t.Fatal(err)
				}
				got := open(t, path)
				if fmt.Sprint(got.ints("prompt_ids")) != fmt.Sprint(prompt) {
					t.Fatal("prompt_ids written differ from the prompt")
				}
				for _, c := range []struct{ got, want string }{
					{"prompt_logits", layout.prefix + ".prompt_logits"},
					{"gen_logits", layout.prefix + ".gen_logits"},
				} {
					e := fixtures.RelError(got.floats(c.got), ref.floats(c.want))
					t.Logf("%s: relative error %.2e", c.got, e)
					if !(e <= tolerance) {
						t.Errorf("%s: relative error %.3g > %g", c.got, e, tolerance)
					}
				}
				if ids := got.ints("gen_ids"); fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
					t.Errorf("gen_ids\n got %v\nwant %v", ids, wantIDs)
				}
			})
		}
	}
}

func TestComputeRejects(t *testing.T) {
	m, err := checkpoint.Load(fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, _ := cpu.New(m.Weights, cpu.Options{})
	for _, c := range []struct {
		ids []int
		gen int
	}{{nil, 1}, {[]int{1, 2}, -1}, {[]int{1, m.Weights.Config.VocabSize}, 0}} {
		if _, err := Compute(b, m.Weights, c.ids, c.gen); err == nil {
			t.Errorf("Compute(%v, %d) succeeded", c.ids, c.gen)
		}
	}
}
