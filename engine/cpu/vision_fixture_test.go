package cpu

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// openVision loads a vision checkpoint, binds its tower, applies mutate
// (when set) and makes a backend.
func openVision(t testing.TB, dir string, opt Options, mutate func(*model.Weights, *model.VisionWeights)) (*Backend, *model.Weights, *model.VisionWeights) {
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
	if mutate != nil {
		cp := *vw
		vw = &cp
		mutate(m.Weights, vw)
	}
	b, err := New(m.Weights, opt)
	if err != nil {
		t.Fatal(err)
	}
	return b, m.Weights, vw
}

// TestVisionFixtures runs every case of the vision fixture (one image, a
// tall one, two images, text alone; both layouts) on the exact path within
// fixtureTolerance (1e-4) and on the fast path within fastTolerance
// (5e-3) of transformers: the image embeddings, the prompt logits and the
// greedy logits, the greedy ids wherever the reference's top two are
// further apart than the tolerance allows to swap, and the M-RoPE
// positions and rope delta exactly.
//
// Measured (exact): embeddings 3.0e-7 to 9.7e-7, prompt logits 2.1e-6 to
// 3.7e-5, greedy logits 2.1e-6 to 2.8e-5; (fast) the image cases 4.3e-6 to
// 4.0e-3 (mlx-4bit/single). The fast path is not held to the bar on
// mlx-4bit/text_only, which has no image: its token 4 is routed at a
// near-tie in layer 0 (the float64 reference's 4th and 5th expert
// probabilities 9.1e-7 apart), which the fast path's int16 activations
// break the other way, and every later row and layer then differs (4.1e-2
// on the logits, the residual stream after layer 1 already 1.1e-2 off the
// exact path's). That is the text model's fast path on this checkpoint's
// random weights, TestFixturesFast's matter; the exact path runs the case.
func TestVisionFixtures(t *testing.T) {
	for _, c := range fixtures.VisionCases(t) {
		for _, pr := range []struct {
			p   Precision
			tol float64
		}{{PrecisionExact, fixtureTolerance}, {PrecisionFast, fastTolerance}} {
			if pr.p == PrecisionFast && c.Name == "mlx-4bit/text_only" {
				continue
			}
			t.Run(string(pr.p)+"/"+c.Name, func(t *testing.T) {
				b, w, vw := openVision(t, c.Dir, Options{Precision: pr.p}, nil)
				r := fixtures.RunVision(t, b, w, vw, c)
				if err := c.CheckPositions(r); err != nil {
					t.Error(err)
				}
				for _, o := range c.Compare(r) {
					t.Logf("%s: relative error %.2e", o.What, o.Err)
					if !(o.Err <= pr.tol) {
						t.Errorf("%s drifts: relative error %.3g > %g", o.What, o.Err, pr.tol)
					}
				}
				if err := fixtures.CheckGreedy(r.GenIDs, c.GenIDs, c.GenLogits, c.Vocab, pr.tol); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestVisionFixturesCatchMutations: each of fixtures.VisionMutations moves
// some output of some case past the exact path's tolerance.
func TestVisionFixturesCatchMutations(t *testing.T) {
	cases := fixtures.VisionCases(t)
	for _, mu := range fixtures.VisionMutations() {
		t.Run(mu.Name, func(t *testing.T) {
			var worst fixtures.Output
			for _, c := range cases {
				if len(c.Images) == 0 {
					continue
				}
				b, w, vw := openVision(t, c.Dir, Options{Precision: PrecisionExact}, mu.Apply)
				o := fixtures.Worst(c.Compare(fixtures.RunVision(t, b, w, vw, c)))
				t.Logf("%s: worst %s, relative error %.2e", c.Name, o.What, o.Err)
				if !(o.Err <= worst.Err) {
					worst = o
				}
				if o.Err <= fixtureTolerance {
					t.Errorf("%s: the mutated model passes: worst relative error %.3g (%s) is within %g", c.Name, o.Err, o.What, fixtureTolerance)
				}
			}
		})
	}
}
