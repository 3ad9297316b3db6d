package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/model"
)

// The matrix products y = x·Wᵀ over a weight W [Out, In] as the checkpoint
// stores it. Two shapes of loop:
//
//   - matVec (few token rows, decode): each output row is one fused pass over
//     the packed row; affine groups fold scale and bias as s·Σq·x + b·Σx, with
//     Σx per group computed once per call.
//   - matMul (prefill chunks): a chunk of chunkRows weight rows is
//     dequantized into a per-goroutine buffer and multiplied with every
//     token row (gemmPacked: six rows × sixteen packed tokens per kernel
//     call; gemmChunk: four rows × two tokens for short chunks), so each
//     packed weight is read once per call.

// tileRows is how many weight rows share each load of x in dot4.
const tileRows = 4

// gemmMinTokens is the number of token rows from which dequantizing a weight
// tile pays off over the fused matrix-vector loop.
const gemmMinTokens = 4

// checkMatrix verifies that w's buffers hold what its shape says, so the
// kernels can index without surprises.
func checkMatrix(w *model.Matrix) error {
	if w.Out <= 0 || w.In <= 0 {
		return fmt.Errorf("%s: empty shape [%d, %d]", w.Name, w.Out, w.In)
	}
	var want int
	switch w.DType {
	case model.BF16, model.F16:
		want = 2 * w.Out * w.In
	case model.F32:
		want = 4 * w.Out * w.In
	case model.Affine:
		if w.Bits != 4 && w.Bits != 8 {
			return fmt.Errorf("%s: %d-bit affine weights are not supported (4 and 8 are)", w.Name, w.Bits)
		}
		per := 32 / w.Bits
		if w.GroupSize <= 0 || w.GroupSize%per != 0 || w.In%w.GroupSize != 0 {
			return fmt.Errorf("%s: group size %d does not divide the input width %d into whole words",
				w.Name, w.GroupSize, w.In)
		}
		groups := w.Out * w.In / w.GroupSize
		if len(w.Scales) != 2*groups || len(w.Biases) != 2*groups {
			return fmt.Errorf("%s: scales/biases hold %d/%d bytes, want %d for [%d, %d] in groups of %d",
				w.Name, len(w.Scales), len(w.Biases), 2*groups, w.Out, w.In, w.GroupSize)
		}
		want = 4 * w.Out * w.In / per
	default:
		return fmt.Errorf("%s: unknown dtype %v", w.Name, w.DType)
	}
	if len(w.Data) != want {
		return fmt.Errorf("%s: holds %d bytes, want %d for %v [%d, %d]", w.Name, len(w.Data), want, w.DType, w.Out, w.In)
	}
	return nil
}

// Views of a matrix's bytes as the element type stored. The checkpoint is
// little-endian like every machine Suzuran runs on, and amd64 and arm64 load
// unaligned words, so the views read the mapped bytes directly.
func u16s(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

func u32s(b []byte) []uint32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func bf16(u uint16) float32 { return math.Float32frombits(uint32(u) << 16) }

// f16 converts an IEEE half to float32, subnormals and infinities included.
func f16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: value = mant·2⁻²⁴, exact in float32.
	f := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		return -f
	}
	return f
}

// dequantRow writes row o of w as float32 into dst[:w.In].
func dequantRow(w *model.Matrix, o int, dst []float32) {
	in := w.In
	dst = dst[:in]
	switch w.DType {
	case model.F32:
		copy(dst, f32s(w.Data)[o*in:(o+1)*in])
	case model.BF16:
		for i, u := range u16s(w.Data)[o*in : (o+1)*in] {
			dst[i] = bf16(u)
		}
	case model.F16:
		for i, u := range u16s(w.Data)[o*in : (o+1)*in] {
			dst[i] = f16(u)
		}
	case model.Affine:
		per := 32 / w.Bits
		mask := uint32(1)<<w.Bits - 1
		groups := in / w.GroupSize
		words := u32s(w.Data)[o*in/per : (o+1)*in/per]
		scales := u16s(w.Scales)[o*groups : (o+1)*groups]
		biases := u16s(w.Biases)[o*groups : (o+1)*groups]
		for g := range groups {
			s, b := bf16(scales[g]), bf16(biases[g])
			seg := dst[g*w.GroupSize : (g+1)*w.GroupSize]
			ws := words[g*w.GroupSize/per : (g+1)*w.GroupSize/per]
			for k, word := range ws {
				for j := range per {
					seg[k*per+j] = s*float32(word>>(uint(j*w.Bits))&mask) + b
				}
			}
		}
	}
}

// simdKernels are assembly versions of the f32 hot loops
// (kernels_amd64.s, attention_amd64.s); nil fields fall back to the Go
// loops. A backend's kernel set holds the table its ISA option chose, and
// every helper takes it as an argument (the matrix products through their
// jobs, attention through its blocks, the DeltaNet scan through its
// heads): there is no package-wide table, so a backend forced to a lower
// level runs that level's code everywhere.
type simdKernels struct {
	// q4Row is one row of a 4-bit affine matrix with 64-wide groups against
	// x reordered by deinterleave64, with Σx per group in xsum.
	q4Row func(words *uint32, xd *float32, scales, biases *uint16, xsum *float32, groups int) float32
	// q4Dequant writes one such row in the same even/odd order.
	q4Dequant func(words *uint32, scales, biases *uint16, groups int, dst *float32)
	// dot4 and dot take lengths that are multiples of 16, dot4x2 of 8.
	dot4   func(w0, w1, w2, w3, x *float32, n int, out *[4]float32)
	dot4x2 func(w0, w1, w2, w3, x0, x1 *float32, n int, out *[8]float32)
	dot    func(a, b *float32, n int) float32
	// deltaStep is one token of the DeltaNet scan for one head (dk a
	// multiple of 8); axpy is y += a·x (n a multiple of 8).
	deltaStep func(s, k, q, v, o *float32, dk, dv int, decay, beta float32)
	axpy      func(y, x *float32, n int, a float32)
	// gemm6x16 multiplies six weight rows with sixteen packed token rows,
	// adding into out.
	gemm6x16 func(w *float32, ldw int, xp *float32, k int, out *[96]float32)
	// dotBF16 is a BF16 row times x (n a multiple of 16).
	dotBF16 func(w *uint16, x *float32, n int) float32
	// scores4 and values4 are attention's four-row loops (attention.go;
	// dim a multiple of 16).
	scores4 func(q0, q1, q2, q3, keys *float32, stride, n, dim int, scale float32, out *float32, outStride int)
	values4 func(outs *[4]*float32, e *float32, eStride int, values *float32, stride, n, dim int)
}

// deinterleave64 reorders each 64-wide group of x as its even elements then
// its odd ones, the order in which q4Row meets the low and high nibbles.
func deinterleave64(dst, x []float32) {
	for g := 0; g+64 <= len(x); g += 64 {
		src, d := x[g:g+64], dst[g:g+64]
		for i := range 32 {
			d[i] = src[2*i]
			d[32+i] = src[2*i+1]
		}
	}
}

// scratch hands out per-goroutine float buffers without allocating on
// every call.
var scratch slicePool[float32]

// matMul computes y[t, o] = Σ_i x[t, i]·w[o, i] for t < rows, with x
// [rows, w.In] and y [rows, w.Out] row-major.
func (b *Backend) matMul(y, x []float32, rows int, w *model.Matrix) {
	if b.quantizedActivations() {
		b.fastProducts([]vecJob{{y: y, x: x, rows: rows, w: w}})
		return
	}
	if rows < gemmMinTokens {
		b.matVec(y, x, rows, w)
		return
	}
	in, out := w.In, w.Out
	// 4-bit rows dequantize fastest into the even/odd order of q4Row; x is
	// put in the same order, which leaves every dot product unchanged.
	k := &b.kern.f32
	permuted := w.DType == model.Affine && w.Bits == 4 && w.GroupSize == 64 && k.q4Dequant != nil
	if permuted {
		xd := make([]float32, rows*in)
		deinterleave64(xd, x[:rows*in])
		x = xd
	}
	var xp []float32
	if rows >= packMinTokens && k.gemm6x16 != nil {
		xp = packTokens(x, rows, in)
	}
	chunks := (out + chunkRows - 1) / chunkRows
	b.pool.parallelFor(chunks, 1, func(lo, hi int) {
		bufp := scratch.get(chunkRows * in)
		defer scratch.put(bufp)
		buf := *bufp
		for c := lo; c < hi; c++ {
			o0 := c * chunkRows
			n := min(chunkRows, out-o0)
			for r := range n {
				if permuted {
					groups := in / 64
					o := o0 + r
					k.q4Dequant(&u32s(w.Data)[o*in/8], &u16s(w.Scales)[o*groups], &u16s(w.Biases)[o*groups], groups, &buf[r*in])
				} else {
					dequantRow(w, o0+r, buf[r*in:(r+1)*in])
				}
			}
			c := gemmTile{y: y, x: x, xp: xp, rows: rows, in: in, out: out, o0: o0, n: n, buf: buf}
			if xp != nil {
				gemmPacked(k, &c)
			} else {
				gemmChunk(k, &c)
			}
		}
	})
}

// chunkRows is how many weight rows matMul dequantizes at a time: 48 rows
// of 2048 floats (384 KiB) stay in a core's L2 cache while every token row
// passes over them, so x is read from memory once per 48 output rows
// rather than once per few. A multiple of six, the micro-kernel's rows.
// (BenchmarkMatMul, 512 rows of a 4-bit [8192, 2048] matrix on one
// thread: 4-row tiles ran at about 6 GMAC/s, 32- to 64-row chunks at
// 18–28 on a loaded machine.)
const chunkRows = 48

// packMinTokens is the number of token rows from which the packed
// outer-product kernel beats two-row dot products despite padding the last
// block of sixteen.
const packMinTokens = 12

// packTokens lays x [rows, in] out in blocks of sixteen token rows, each
// k-major (block[i*16+t] = x[t][i]), zero-padded past the last row: the
// order in which gemm6x16 loads sixteen tokens' element i at once.
func packTokens(x []float32, rows, in int) []float32 {
	blocks := (rows + 15) / 16
	xp := make([]float32, blocks*16*in)
	for t := range rows {
		block := xp[(t/16)*16*in:]
		lane := t % 16
		for i, v := range x[t*in : (t+1)*in] {
			block[i*16+lane] = v
		}
	}
	return xp
}

// gemmTile is one chunk of matMul's dequantizing product: y [rows, out]
// and x [rows, in] row-major, xp x packed by packTokens (nil when the
// chunk is not multiplied from packed tokens), and the chunk's n
// dequantized weight rows in buf ([n, in]), for y's columns o0 … o0+n-1.
type gemmTile struct {
	y, x, xp      []float32
	rows, in, out int
	o0, n         int
	buf           []float32
}

// gemmPacked computes y[t, o0+r] for r < n from n dequantized rows in buf
// with the outer-product kernel over packed token blocks; rows past the
// last multiple of six use dot products. k is split into blocks of
// packKBlock so that a token block's slice (16 KiB) stays in L1 while every
// six-row group of the chunk passes over it.
func gemmPacked(sk *simdKernels, c *gemmTile) {
	y, x, xp, buf := c.y, c.x, c.xp, c.buf
	rows, in, out, o0, n := c.rows, c.in, c.out, c.o0, c.n
	full := n - n%6
	groups := full / 6
	accp := scratch.get(groups * 96)
	defer scratch.put(accp)
	acc := *accp
	for tb := 0; tb*16 < rows; tb++ {
		block := xp[tb*16*in : (tb+1)*16*in]
		nt := min(16, rows-tb*16)
		clear(acc)
		for kb := 0; kb < in; kb += packKBlock {
			k := min(packKBlock, in-kb)
			for g := range groups {
				sk.gemm6x16(&buf[g*6*in+kb], in, &block[kb*16], k, (*[96]float32)(acc[g*96:g*96+96]))
			}
		}
		for g := range groups {
			for i := range 6 {
				for t := range nt {
					y[(tb*16+t)*out+o0+g*6+i] = acc[g*96+i*16+t]
				}
			}
		}
	}
	for r := full; r < n; r++ {
		for t := range rows {
			y[t*out+o0+r] = dotWith(sk, buf[r*in:(r+1)*in], x[t*in:(t+1)*in])
		}
	}
}

// packKBlock is the k-slice gemmPacked multiplies at a time.
const packKBlock = 256

// gemmChunk computes y[t, o0+r] for r < n from n dequantized rows in buf.
func gemmChunk(sk *simdKernels, c *gemmTile) {
	y, x, buf := c.y, c.x, c.buf
	rows, in, out, o0, n := c.rows, c.in, c.out, c.o0, c.n
	full := n &^ (tileRows - 1)
	t := 0
	for ; t+2 <= rows; t += 2 {
		x0, x1 := x[t*in:(t+1)*in], x[(t+1)*in:(t+2)*in]
		y0, y1 := y[t*out+o0:t*out+o0+n], y[(t+1)*out+o0:(t+1)*out+o0+n]
		for r := 0; r < full; r += tileRows {
			w := [4][]float32{buf[r*in : (r+1)*in], buf[(r+1)*in : (r+2)*in], buf[(r+2)*in : (r+3)*in], buf[(r+3)*in : (r+4)*in]}
			dot4x2With(sk, &w, x0, x1, y0[r:r+4], y1[r:r+4])
		}
	}
	for ; t < rows; t++ {
		xt := x[t*in : (t+1)*in]
		yt := y[t*out+o0 : t*out+o0+n]
		for r := 0; r < full; r += tileRows {
			yt[r], yt[r+1], yt[r+2], yt[r+3] = dot4With(sk, buf[r*in:(r+1)*in], buf[(r+1)*in:(r+2)*in],
				buf[(r+2)*in:(r+3)*in], buf[(r+3)*in:(r+4)*in], xt)
		}
	}
	for r := full; r < n; r++ {
		for t := range rows {
			y[t*out+o0+r] = dotWith(sk, buf[r*in:(r+1)*in], x[t*in:(t+1)*in])
		}
	}
}

// vecJob is one matrix-vector product y = x·wᵀ over a few token rows.
type vecJob struct {
	y, x []float32
	rows int
	w    *model.Matrix
	// Set by matVecs: the backend's f32 kernels, Σx per group (affine)
	// and x in q4Row's order.
	k        *simdKernels
	xsum, xd []float32
}

// matVec is matMul for a few token rows: one fused pass per packed row and
// token, nothing dequantized into memory.
func (b *Backend) matVec(y, x []float32, rows int, w *model.Matrix) {
	b.matVecs([]vecJob{{y: y, x: x, rows: rows, w: w}})
}

// matVecs runs several matrix-vector products in one parallel region over
// all their output rows. Decode calls it with every projection that reads
// the same input (q, k and v; the chosen experts' gate and up): one
// region instead of one per matrix saves the start and the ragged end of
// each, which matter at a few milliseconds per layer.
func (b *Backend) matVecs(jobs []vecJob) {
	if b.quantizedActivations() {
		b.fastProducts(jobs)
		return
	}
	total := 0
	for i := range jobs {
		jobs[i].k = &b.kern.f32
		prepareVecJob(&jobs[i], jobs[:i])
		total += jobs[i].w.Out
	}
	b.pool.parallelFor(total, 16, func(lo, hi int) {
		base := 0
		for i := range jobs {
			j := &jobs[i]
			a, z := max(lo-base, 0), min(hi-base, j.w.Out)
			if a < z {
				j.rowsRange(a, z)
			}
			base += j.w.Out
		}
	})
}

// prepareVecJob computes what the job's loop needs from x once, or takes it
// from an earlier job over the same input.
func prepareVecJob(j *vecJob, earlier []vecJob) {
	w := j.w
	if w.DType != model.Affine {
		return
	}
	fast := w.Bits == 4 && w.GroupSize == 64 && j.k.q4Row != nil
	for _, e := range earlier {
		if len(e.x) > 0 && &e.x[0] == &j.x[0] && e.rows == j.rows && e.xsum != nil && e.w.GroupSize == w.GroupSize {
			j.xsum = e.xsum
			if fast && e.xd != nil {
				j.xd = e.xd
				return
			}
		}
	}
	in, gs := w.In, w.GroupSize
	if j.xsum == nil {
		groups := in / gs
		j.xsum = make([]float32, j.rows*groups)
		for t := range j.rows {
			for g := range groups {
				var s float32
				for _, v := range j.x[t*in+g*gs : t*in+(g+1)*gs] {
					s += v
				}
				j.xsum[t*groups+g] = s
			}
		}
	}
	if fast {
		j.xd = make([]float32, j.rows*in)
		deinterleave64(j.xd, j.x[:j.rows*in])
	}
}

// rowsRange computes the job's outputs o in [lo, hi) for every token row,
// in blocks of vecBlockRows weight rows: a block stays in cache while every
// token row passes over it, so a batched decode step (a row per sequence)
// reads each weight from memory once, not once per row. Each output is the
// same computation whatever the number of rows, which batched passes rely
// on for exactness.
func (j *vecJob) rowsRange(lo, hi int) {
	for b := lo; b < hi; b += vecBlockRows {
		j.rowsBlock(b, min(b+vecBlockRows, hi))
	}
}

// vecBlockRows is the weight rows rowsRange keeps in cache at a time: 16
// rows of 2048 are 16 KiB at 4 bits, 64 KiB in BF16.
const vecBlockRows = 16

// rowsBlock computes the job's outputs o in [lo, hi) for every token row.
func (j *vecJob) rowsBlock(lo, hi int) {
	w := j.w
	in, out := w.In, w.Out
	if j.xd != nil {
		groups := in / 64
		words, scales, biases := u32s(w.Data), u16s(w.Scales), u16s(w.Biases)
		for t := range j.rows {
			yt, xt, xs := j.y[t*out:(t+1)*out], j.xd[t*in:(t+1)*in], j.xsum[t*groups:(t+1)*groups]
			for o := lo; o < hi; o++ {
				yt[o] = j.k.q4Row(&words[o*in/8], &xt[0], &scales[o*groups], &biases[o*groups], &xs[0], groups)
			}
		}
		return
	}
	for t := range j.rows {
		xt := j.x[t*in : (t+1)*in]
		yt := j.y[t*out : (t+1)*out]
		switch w.DType {
		case model.Affine:
			groups := in / w.GroupSize
			xs := j.xsum[t*groups : (t+1)*groups]
			if w.Bits == 4 {
				affine4Rows(yt, xt, xs, w, lo, hi)
			} else {
				affine8Rows(yt, xt, xs, w, lo, hi)
			}
		case model.BF16:
			data := u16s(w.Data)
			for o := lo; o < hi; o++ {
				yt[o] = dotBF16With(j.k, data[o*in:(o+1)*in], xt)
			}
		case model.F16:
			data := u16s(w.Data)
			for o := lo; o < hi; o++ {
				var s float32
				for i, u := range data[o*in : (o+1)*in] {
					s += f16(u) * xt[i]
				}
				yt[o] = s
			}
		case model.F32:
			data := f32s(w.Data)
			for o := lo; o < hi; o++ {
				yt[o] = dotWith(j.k, data[o*in:(o+1)*in], xt)
			}
		}
	}
}

// affine4Rows computes y[o] for o in [lo, hi) of a 4-bit affine matrix.
func affine4Rows(y, x, xsum []float32, w *model.Matrix, lo, hi int) {
	in, gs := w.In, w.GroupSize
	groups := in / gs
	wpg := gs / 8 // words per group
	words := u32s(w.Data)
	scales, biases := u16s(w.Scales), u16s(w.Biases)
	for o := lo; o < hi; o++ {
		row := words[o*in/8 : (o+1)*in/8]
		sc := scales[o*groups : (o+1)*groups]
		bi := biases[o*groups : (o+1)*groups]
		var acc float32
		for g := range groups {
			ws := row[g*wpg : (g+1)*wpg]
			xg := x[g*gs : (g+1)*gs]
			var a0, a1, a2, a3 float32
			for k, q := range ws {
				xx := xg[k*8 : k*8+8 : k*8+8]
				a0 += float32(q&15)*xx[0] + float32(q>>16&15)*xx[4]
				a1 += float32(q>>4&15)*xx[1] + float32(q>>20&15)*xx[5]
				a2 += float32(q>>8&15)*xx[2] + float32(q>>24&15)*xx[6]
				a3 += float32(q>>12&15)*xx[3] + float32(q>>28)*xx[7]
			}
			acc += bf16(sc[g])*((a0+a1)+(a2+a3)) + bf16(bi[g])*xsum[g]
		}
		y[o] = acc
	}
}

// affine8Rows computes y[o] for o in [lo, hi) of an 8-bit affine matrix.
func affine8Rows(y, x, xsum []float32, w *model.Matrix, lo, hi int) {
	in, gs := w.In, w.GroupSize
	groups := in / gs
	wpg := gs / 4
	words := u32s(w.Data)
	scales, biases := u16s(w.Scales), u16s(w.Biases)
	for o := lo; o < hi; o++ {
		row := words[o*in/4 : (o+1)*in/4]
		sc := scales[o*groups : (o+1)*groups]
		bi := biases[o*groups : (o+1)*groups]
		var acc float32
		for g := range groups {
			ws := row[g*wpg : (g+1)*wpg]
			xg := x[g*gs : (g+1)*gs]
			var a0, a1, a2, a3 float32
			for k, q := range ws {
				xx := xg[k*4 : k*4+4 : k*4+4]
				a0 += float32(q&255) * xx[0]
				a1 += float32(q>>8&255) * xx[1]
				a2 += float32(q>>16&255) * xx[2]
				a3 += float32(q>>24) * xx[3]
			}
			acc += bf16(sc[g])*((a0+a1)+(a2+a3)) + bf16(bi[g])*xsum[g]
		}
		y[o] = acc
	}
}

// dotWith is Σ a[i]·b[i] over len(a), with the kernels k.
func dotWith(k *simdKernels, a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	if n := len(a) &^ 15; n > 0 && k.dot != nil {
		s0 = k.dot(&a[0], &b[0], n)
		i = n
	}
	for ; i+4 <= len(a); i += 4 {
		aa := a[i : i+4 : i+4]
		bb := b[i : i+4 : i+4]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dotBF16With is Σ bf16(a[i])·b[i] with the kernels k.
func dotBF16With(k *simdKernels, a []uint16, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	if n := len(a) &^ 15; n > 0 && k.dotBF16 != nil {
		s0 = k.dotBF16(&a[0], &b[0], n)
		i = n
	}
	for ; i+4 <= len(a); i += 4 {
		aa := a[i : i+4 : i+4]
		bb := b[i : i+4 : i+4]
		s0 += bf16(aa[0]) * bb[0]
		s1 += bf16(aa[1]) * bb[1]
		s2 += bf16(aa[2]) * bb[2]
		s3 += bf16(aa[3]) * bb[3]
	}
	for ; i < len(a); i++ {
		s0 += bf16(a[i]) * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot4With is four dot products of w0..w3 with one x: each load of x
// serves four weight rows.
func dot4With(k *simdKernels, w0, w1, w2, w3, x []float32) (float32, float32, float32, float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	var s0, s1, s2, s3 float32
	start := 0
	if m := n &^ 15; m > 0 && k.dot4 != nil {
		var out [4]float32
		k.dot4(&w0[0], &w1[0], &w2[0], &w3[0], &x[0], m, &out)
		s0, s1, s2, s3 = out[0], out[1], out[2], out[3]
		start = m
	}
	for i := start; i < n; i++ {
		v := x[i]
		s0 += w0[i] * v
		s1 += w1[i] * v
		s2 += w2[i] * v
		s3 += w3[i] * v
	}
	return s0, s1, s2, s3
}

// dot4x2With writes the dot products of w's four rows with x0 into y0[:4]
// and with x1 into y1[:4].
func dot4x2With(k *simdKernels, w *[4][]float32, x0, x1, y0, y1 []float32) {
	w0, w1, w2, w3 := w[0], w[1], w[2], w[3]
	n := len(x0)
	if m := n &^ 7; m > 0 && k.dot4x2 != nil {
		var out [8]float32
		k.dot4x2(&w0[0], &w1[0], &w2[0], &w3[0], &x0[0], &x1[0], m, &out)
		for i := m; i < n; i++ {
			a, b := x0[i], x1[i]
			out[0] += w0[i] * a
			out[1] += w1[i] * a
			out[2] += w2[i] * a
			out[3] += w3[i] * a
			out[4] += w0[i] * b
			out[5] += w1[i] * b
			out[6] += w2[i] * b
			out[7] += w3[i] * b
		}
		copy(y0[:4], out[:4])
		copy(y1[:4], out[4:])
		return
	}
	y0[0], y0[1], y0[2], y0[3] = dot4With(k, w0, w1, w2, w3, x0)
	y1[0], y1[1], y1[2], y1[3] = dot4With(k, w0, w1, w2, w3, x1)
}

// axpyWith adds a·x to y, with the kernels k.
func axpyWith(k *simdKernels, y, x []float32, a float32) {
	x = x[:len(y)]
	i := 0
	if n := len(y) &^ 7; n > 0 && k.axpy != nil {
		k.axpy(&y[0], &x[0], n, a)
		i = n
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}
