package cpu

import "math"

// rmsNorm writes x·rsqrt(mean(x²)+eps)·weight into y. The sum of squares
// is taken in float64: it costs nothing next to the matrix products and
// keeps long rows exact.
func rmsNorm(y, x, weight []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	r := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	weight = weight[:len(x)]
	y = y[:len(x)]
	for i, v := range x {
		y[i] = v * r * weight[i]
	}
}

// l2Normalize scales x in place to x·rsqrt(Σx²+eps)·scale.
func l2Normalize(x []float32, eps, scale float64) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	r := float32(scale / math.Sqrt(ss+eps))
	for i := range x {
		x[i] *= r
	}
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func silu(x float32) float32 { return x * sigmoid(x) }

// softplus is log(1+eˣ), linear above 20 as torch's default threshold.
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}
