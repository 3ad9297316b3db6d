package reference

import (
	"fmt"
	"math"
	"testing"
)

// TestClosedForms checks each step on inputs whose result is known by
// hand. Tolerance 1e-12: float64 rounding of a few operations.
func TestClosedForms(t *testing.T) {
	S := make([]float64, 4) // [Dk=2][Dv=2], starts at 0
	decay, beta := DeltaNetGates(0, 0, 0, 0)
	cases := []struct {
		name      string
		got, want []float64
	}{
		{"RMSNorm([3,4], w=[1,2])", RMSNorm([]float64{3, 4}, []float32{1, 2}, 0), []float64{3 / math.Sqrt(12.5), 8 / math.Sqrt(12.5)}},
		{"L2Normalize([3,4], scale 2)", L2Normalize([]float64{3, 4}, 0, 2), []float64{1.2, 1.6}},
		{"Rotate([1,0,5], π/2)", Rotate([]float64{1, 0, 5}, []float64{math.Pi / 2}), []float64{0, 1, 5}},
		{"RopeAngles(3, rot 4, theta 100)", RopeAngles(3, 4, 100), []float64{3, 0.3}},
		{"Softmax([0, ln 3])", Softmax([]float64{0, math.Log(3)}), []float64{0.25, 0.75}},
		// softplus(0) = ln 2, so g = −ln 2 and decay = 1/2; sigmoid(0) = 1/2.
		{"DeltaNetGates(0, 0, 0, 0)", []float64{decay, beta}, []float64{0.5, 0.5}},
		// From S = 0: S = k ⊗ beta·v, so o = (q·k)·beta·v.
		{"DeltaRule from zero", DeltaRule(S, []float64{1, 0}, []float64{2, 0}, []float64{2, 3}, 0.9, 0.5), []float64{2, 3}},
		{"DeltaRule state", S, []float64{1, 1.5, 0, 0}},
		// One key: the softmax is 1, the output v·sigmoid(gate).
		{"GatedAttention, one key", GatedAttention([]float64{1, 2}, [][]float64{{3, 4}}, [][]float64{{5, 6}}, []float64{0, math.Inf(1)}), []float64{2.5, 6}},
	}
	for _, c := range cases {
		if len(c.got) != len(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			continue
		}
		for i := range c.want {
			if math.Abs(c.got[i]-c.want[i]) > 1e-12 {
				t.Errorf("%s = %v, want %v", c.name, fmt.Sprint(c.got), c.want)
				break
			}
		}
	}
}
