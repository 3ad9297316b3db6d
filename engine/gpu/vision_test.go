package gpu

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// TestVisionTowerEmu runs the tower on the emulator and holds the
// embeddings to transformers': float operands within 1e-4 (the CPU exact
// path's bar), half operands within 5e-3 (the GPU's half-path bar). The
// emulator takes seconds per image, so the test takes two cases: the
// upscaled square image and a landscape one (two_images), and the tall one,
// each in one layout (the layouts bind the same tower: engine/checkpoint's
// TestVisionLazyAndBothLayouts). Measured over every image case of both
// layouts: float 6.7e-7 to 7.6e-7, half 1.1e-6 to 1.2e-6.
func TestVisionTowerEmu(t *testing.T) {
	for _, c := range fixtures.VisionCases(t) {
		if c.Name != "hf-bf16/two_images" && c.Name != "mlx-4bit/tall" {
			continue
		}
		for _, o := range []struct {
			ops Operands
			tol float64
		}{{FloatOperands, 1e-4}, {HalfOperands, 5e-3}} {
			t.Run(o.ops.String()+"/"+c.Name, func(t *testing.T) {
				m, err := checkpoint.Load(c.Dir)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				vw, err := m.Vision()
				if err != nil {
					t.Fatal(err)
				}
				b, err := New(openTestDevice(t, 1), m.Weights, Options{GEMMOperands: o.ops})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				var got []float32
				for i := range c.Images {
					e, err := b.EncodeImage(vw, &c.Images[i])
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, e...)
				}
				e := fixtures.RelError(got, c.Embeds)
				t.Logf("image embeddings: relative error %.2e", e)
				if !(e <= o.tol) {
					t.Fatalf("image embeddings: relative error %.3g > %g", e, o.tol)
				}
			})
		}
	}
}
