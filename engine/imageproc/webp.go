package imageproc

import "image"

// A lossy WebP is VP8 video's limited-range BT.601 YCbCr, which
// x/image/webp returns as an image.YCbCr (or NYCbCrA with alpha) whose At
// would convert it as JPEG's full-range YCbCr: 9 levels off on average on
// the test photo. PIL decodes WebP with libwebp, whose conversion is this
// one (its VP8YUVToR/G/B: 14-bit fixed point, results in 6 fractional
// bits, clipped).

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
