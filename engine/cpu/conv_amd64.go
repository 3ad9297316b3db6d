package cpu

//go:noescape
func convRowAVX2(out, rows *float32, stride int, taps *float32, k, w int)

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
