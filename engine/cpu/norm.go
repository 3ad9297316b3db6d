package cpu

import "math"

// rmsNorm writes x·rsqrt(mean(x²)+eps)·weight into y. The sum of squares
// is taken in float64: it costs little next to the matrix products and
// keeps long rows exact.
func rmsNorm(y, x, weight []float32, eps float32) {
	ss := sumSquares(x)
	r := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	weight = weight[:len(x)]
	y = y[:len(x)]
	for i, v := range x {
		y[i] = v * r * weight[i]
	}
}

// sumSquares is Σx² in float64, in four running sums (elements 4i, 4i+1,
// 4i+2, 4i+3; the tail's go to the first) added pairwise at the end: four
// independent chains of additions instead of one.
func sumSquares(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a, b, c, d := float64(x[i]), float64(x[i+1]), float64(x[i+2]), float64(x[i+3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for ; i < len(x); i++ {
		v := float64(x[i])
		s0 += v * v
	}
	return (s0 + s1) + (s2 + s3)
}

// l2Normalize scales x in place to x·rsqrt(Σx²+eps)·scale.
func l2Normalize(x []float32, eps, scale float64) {
	ss := sumSquares(x)
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
