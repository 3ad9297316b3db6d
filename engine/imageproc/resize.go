package imageproc

// The resize is torch's antialiased bicubic interpolation
// (interpolate(mode="bicubic", antialias=True), which torchvision's resize
// calls): separable, the width first, then the height, each output sample a
// normalised sum of the input samples under a Keys cubic (a = -0.5) whose
// support is widened by the scale when shrinking. Of torch's two CPU
// implementations this is the uint8 one, which torchvision runs on a uint8
// image on CPUs with AVX2 (where the reference was made): int16 weights at
// a fixed-point precision, int32 sums, and a rounded, clamped uint8 image
// between the passes. It gives the reference's pixel values exactly; the
// float implementation (uint8 → float32, resize, round) differs from them
// by up to 21 uint8 steps on the fixture's upscaled image.

// cubicAA is the filter of torch's antialiased bicubic. The conversions
// keep each product rounded on its own, as the reference computes it (Go
// may otherwise fuse a multiply and an add, as it does on arm64).
func cubicAA(x float64) float64 {
	const a = -0.5
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return float64(float64(float64(float64((a+2)*x)-(a+3))*x)*x) + 1
	}
	if x < 2 {
		return float64(float64(float64(float64(a*x)-5*a)*x)+8*a)*x - 4*a
	}
	return 0
}

// taps are the input range and normalised weights of each output sample
// along one dimension.
type taps struct {
	start []int       // first input index of output i
	n     []int       // number of inputs of output i
	w     [][]float64 // their weights
	max   float64     // the largest weight
}

// computeTaps follows torch's _compute_weights_aa: center = scale·(i+½),
// the inputs whose centres lie within the support, weights
// filter((j - center + ½)·invscale) normalised to sum 1.
func computeTaps(in, out int) taps {
	scale := float64(in) / float64(out)
	support, invscale := 2.0, 1.0
	if scale >= 1 {
		support, invscale = 2*scale, 1/scale
	}
	t := taps{start: make([]int, out), n: make([]int, out), w: make([][]float64, out)}
	for i := 0; i < out; i++ {
		center := scale * (float64(i) + 0.5)
		xmin := max(int(center-support+0.5), 0)
		xsize := min(int(center+support+0.5), in) - xmin
		w := make([]float64, max(xsize, 0))
		var total float64
		for j := range w {
			w[j] = cubicAA((float64(j+xmin) - center + 0.5) * invscale)
			total += w[j]
		}
		if total != 0 {
			for j := range w {
				w[j] /= total
				t.max = max(t.max, w[j])
			}
		}
		t.start[i], t.n[i], t.w[i] = xmin, xsize, w
	}
	return t
}

// fixedTaps are taps with int16 weights at a precision in bits, as torch's
// uint8 path (after Pillow-SIMD) makes them: the precision is the largest
// (up to 22 bits) that keeps twice the largest weight under 2^15, each
// weight rounded half away from zero.
type fixedTaps struct {
	start, n  []int
	w         [][]int32
	precision uint
}

func computeFixedTaps(in, out int) fixedTaps {
	t := computeTaps(in, out)
	var prec uint
	for prec = 0; prec < 22; prec++ {
		if int(0.5+t.max*float64(int(1)<<(prec+1))) >= 1<<15 {
			break
		}
	}
	f := fixedTaps{start: t.start, n: t.n, w: make([][]int32, out), precision: prec}
	for i, ws := range t.w {
		f.w[i] = make([]int32, len(ws))
		for j, w := range ws {
			v := float64(w * float64(int(1)<<prec))
			if v < 0 {
				f.w[i][j] = int32(int16(v - 0.5))
			} else {
				f.w[i][j] = int32(int16(v + 0.5))
			}
		}
	}
	return f
}

func clampShift(acc int32, prec uint) uint8 {
	v := acc >> prec
	return uint8(min(255, max(0, v)))
}

// resizeUint8 is torch's uint8 path: each pass accumulates in int32 from
// 2^(precision-1) and stores the shifted sum clamped to uint8.
func resizeUint8(img *RGB, oh, ow int) []uint8 {
	w, h := img.Width, img.Height
	tmp := img.Pix
	if ow != w {
		tx := computeFixedTaps(w, ow)
		tmp = make([]uint8, 3*h*ow)
		for y := 0; y < h; y++ {
			src, dst := img.Pix[3*y*w:], tmp[3*y*ow:]
			for x := 0; x < ow; x++ {
				s, n, wt := tx.start[x], tx.n[x], tx.w[x]
				for c := 0; c < 3; c++ {
					acc := int32(1) << (tx.precision - 1)
					for j := 0; j < n; j++ {
						acc += int32(src[3*(s+j)+c]) * wt[j]
					}
					dst[3*x+c] = clampShift(acc, tx.precision)
				}
			}
		}
	}
	if oh == h {
		return tmp
	}
	ty := computeFixedTaps(h, oh)
	out := make([]uint8, 3*oh*ow)
	for y := 0; y < oh; y++ {
		s, n, wt := ty.start[y], ty.n[y], ty.w[y]
		dst := out[3*y*ow : 3*(y+1)*ow]
		for i := range dst {
			acc := int32(1) << (ty.precision - 1)
			for j := 0; j < n; j++ {
				acc += int32(tmp[3*(s+j)*ow+i]) * wt[j]
			}
			dst[i] = clampShift(acc, ty.precision)
		}
	}
	return out
}
