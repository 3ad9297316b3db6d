package cpu

// Row kernels of rowops_amd64.s that do the Go loops' arithmetic
// operation for operation (no fused multiply-add), so that a row's bits do
// not depend on the instruction set or on where a loop's tail falls.

//go:noescape
func convRowAVX2(out, rows *float32, stride int, taps *float32, k, w int)

//go:noescape
func scaleAddAVX2(y, x *float32, n int, a float32)

// scaleAddFor is y[i] += a·x[i] for the instruction set: the assembly on
// the AVX2 levels, scaleAddGo elsewhere.
func scaleAddFor(isa ISA) func(y, x []float32, a float32) {
	if isa == ISAAVX2 || isa == ISAVNNI {
		return scaleAddAVX2Slice
	}
	return scaleAddGo
}

func scaleAddAVX2Slice(y, x []float32, a float32) {
	x = x[:len(y)]
	n := len(y) &^ 7
	if n > 0 {
		scaleAddAVX2(&y[0], &x[0], n, a)
	}
	scaleAddGo(y[n:], x[n:], a)
}

// convRowFor is the conv's row kernel for the instruction set: the
// assembly on the AVX2 levels, which adds the same products in the same
// order as convRowGo and so gives its bits, the Go loop elsewhere.
func convRowFor(isa ISA) func(out, rows []float32, stride int, taps []float32, k int) {
	if isa == ISAAVX2 || isa == ISAVNNI {
		return convRowAVX2Slice
	}
	return convRowGo
}

func convRowAVX2Slice(out, rows []float32, stride int, taps []float32, k int) {
	w := len(out)
	n := w &^ 7
	if k < 1 || n == 0 {
		convRowGo(out, rows, stride, taps, k)
		return
	}
	_ = rows[(k-1)*stride+w-1]
	_ = taps[k*w-1]
	convRowAVX2(&out[0], &rows[0], stride, &taps[0], k, w)
	if n == w {
		return
	}
	// The tail: the last w−n channels, each from 0 tap by tap.
	for i := n; i < w; i++ {
		var s float32
		for j := range k {
			s += taps[j*w+i] * rows[j*stride+i]
		}
		out[i] = s
	}
}
