package imageproc

import "image"

// A lossy WebP is VP8 video's limited-range BT.601 YCbCr at 4:2:0, which
// x/image/webp returns as an image.YCbCr (or NYCbCrA with alpha) whose At
// would convert it as JPEG's full-range YCbCr with the nearest chroma
// sample: 9 levels off on average on the test photo. PIL decodes WebP with
// libwebp, which upsamples the chroma with its "fancy" filter (each output
// sample 9/16, 3/16, 3/16, 1/16 of the four nearest chroma samples, in its
// integer steps) and converts with VP8YUVToR/G/B (14-bit fixed point,
// results in 6 fractional bits, clipped); this is both.

func webpYCbCr(format string, m image.Image) (*image.YCbCr, bool) {
	if format != "webp" {
		return nil, false
	}
	switch m := m.(type) {
	case *image.YCbCr:
		return m, true
	case *image.NYCbCrA:
		return &m.YCbCr, true // alpha is dropped, as convert("RGB") drops it
	}
	return nil, false
}

func multHi(v, coeff int) int { return (v * coeff) >> 8 }

func clip8(v int) uint8 {
	const fix, mask = 6, (256 << 6) - 1
	if v&^mask == 0 {
		return uint8(v >> fix)
	}
	if v < 0 {
		return 0
	}
	return 255
}

func webpToRGB(m *image.YCbCr) *RGB {
	if m.SubsampleRatio == image.YCbCrSubsampleRatio420 && m.Rect.Min == (image.Point{}) {
		return webpFancyToRGB(m)
	}
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	out := &RGB{Width: w, Height: h, Pix: make([]uint8, 3*w*h)}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			yy := int(m.Y[m.YOffset(b.Min.X+x, b.Min.Y+y)])
			ci := m.COffset(b.Min.X+x, b.Min.Y+y)
			u, v := int(m.Cb[ci]), int(m.Cr[ci])
			i := 3 * (y*w + x)
			out.Pix[i] = clip8(multHi(yy, 19077) + multHi(v, 26149) - 14234)
			out.Pix[i+1] = clip8(multHi(yy, 19077) - multHi(u, 6419) - multHi(v, 13320) + 8708)
			out.Pix[i+2] = clip8(multHi(yy, 19077) + multHi(u, 33050) - 17685)
		}
	}
	return out
}

func yuvToRGB(dst []uint8, yy, u, v int) {
	dst[0] = clip8(multHi(yy, 19077) + multHi(v, 26149) - 14234)
	dst[1] = clip8(multHi(yy, 19077) - multHi(u, 6419) - multHi(v, 13320) + 8708)
	dst[2] = clip8(multHi(yy, 19077) + multHi(u, 33050) - 17685)
}

// fancyChroma is libwebp's UpsampleRgbLinePair for one chroma plane: the
// chroma of the two output rows between chroma row t (above) and c
// (below), for a width of w pixels.
func fancyChroma(t, c []uint8, w int, top, bot []int) {
	tl, l := int(t[0]), int(c[0])
	top[0] = (3*tl + l + 2) >> 2
	bot[0] = (3*l + tl + 2) >> 2
	for x := 1; x <= (w-1)>>1; x++ {
		tt, cc := int(t[x]), int(c[x])
		avg := tl + tt + l + cc + 8
		d12 := (avg + 2*(tt+l)) >> 3
		d03 := (avg + 2*(tl+cc)) >> 3
		top[2*x-1] = (d12 + tl) >> 1
		top[2*x] = (d03 + tt) >> 1
		bot[2*x-1] = (d03 + l) >> 1
		bot[2*x] = (d12 + cc) >> 1
		tl, l = tt, cc
	}
	if w&1 == 0 {
		top[w-1] = (3*tl + l + 2) >> 2
		bot[w-1] = (3*l + tl + 2) >> 2
	}
}

// webpFancyToRGB converts as libwebp's EmitFancyRGB: the first row from
// chroma row 0 alone, then rows (2k-1, 2k) between chroma rows k-1 and k,
// and the last row of an even height from the last chroma row alone.
func webpFancyToRGB(m *image.YCbCr) *RGB {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	cw := (w + 1) / 2
	out := &RGB{Width: w, Height: h, Pix: make([]uint8, 3*w*h)}
	cb := func(k int) []uint8 { return m.Cb[k*m.CStride : k*m.CStride+cw] }
	cr := func(k int) []uint8 { return m.Cr[k*m.CStride : k*m.CStride+cw] }
	topU, botU, topV, botV := make([]int, w), make([]int, w), make([]int, w), make([]int, w)
	emit := func(row int, u, v []int) {
		ys := m.Y[row*m.YStride:]
		dst := out.Pix[3*row*w:]
		for x := 0; x < w; x++ {
			yuvToRGB(dst[3*x:], int(ys[x]), u[x], v[x])
		}
	}
	fancyChroma(cb(0), cb(0), w, topU, botU)
	fancyChroma(cr(0), cr(0), w, topV, botV)
	emit(0, topU, topV)
	y := 1
	for ; y+1 < h; y += 2 {
		k := (y + 1) / 2
		fancyChroma(cb(k-1), cb(k), w, topU, botU)
		fancyChroma(cr(k-1), cr(k), w, topV, botV)
		emit(y, topU, topV)
		emit(y+1, botU, botV)
	}
	if y < h { // the last row of an even height
		k := (h - 1) / 2
		fancyChroma(cb(k), cb(k), w, topU, botU)
		fancyChroma(cr(k), cr(k), w, topV, botV)
		emit(y, topU, topV)
	}
	return out
}
