package reference_test

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/internal/reference"
	"github.com/suzuran-app/suzuran/engine/model"
)

// Tolerances of the float64 model against transformers' float64 run on the
// vision fixture. The tower has no f32 parts in transformers but the
// bilinear weights of the position embeddings (from an f32 linspace) and
// the f32 storage: measured 1.0e-7 to 1.8e-7 on the embeddings, so 1e-6.
// The logits carry the text model's f32 parts, as fixtureTolerance says:
// measured 8e-7 to 3.2e-5 (mlx-4bit/text_only), held to the same 5e-5.
const (
	embedTolerance  = 1e-6
	visionTolerance = fixtureTolerance
)

func loadVision(t testing.TB, dir string) (*checkpoint.Model, *model.VisionWeights) {
	t.Helper()
	m, err := checkpoint.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	vw, err := m.Vision()
	if err != nil {
		t.Fatal(err)
	}
	return m, vw
}

// TestVisionFixture holds the float64 tower, the M-RoPE positions and the
// text model with images to transformers' outputs, for every case of the
// vision fixture in both layouts.
func TestVisionFixture(t *testing.T) {
	for _, c := range fixtures.VisionCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			m, vw := loadVision(t, c.Dir)
			r := fixtures.RunVision(t, reference.New(m.Weights, nil), m.Weights, vw, c)
			if err := c.CheckPositions(r); err != nil {
				t.Error(err)
			}
			for i, o := range c.Compare(r) {
				tol := visionTolerance
				if i == 0 && len(c.Images) > 0 {
					tol = embedTolerance
				}
				t.Logf("%s: %.2e", o.What, o.Err)
				if !(o.Err <= tol) {
					t.Errorf("%s: relative error %.2e, over %g", o.What, o.Err, tol)
				}
			}
			if err := fixtures.CheckGreedy(r.GenIDs, c.GenIDs, c.GenLogits, c.Vocab, visionTolerance); err != nil {
				t.Error(err)
			}
		})
	}
}
