package imageproc

import "image"

// PIL decodes JPEG with libjpeg(-turbo), which upsamples subsampled chroma
// with its "fancy" triangle filter (3/4 of the nearer, 1/4 of the farther
// sample in each direction, edges replicated) and converts YCbCr to RGB
// with its 16-bit fixed-point tables (jdcolor.c). image/jpeg keeps the
// chroma planes at their stored size and its At takes the nearest sample,
// which puts colour edges up to ~90 levels off on a 4:2:0 file; this
// conversion does libjpeg's for 4:4:4, 4:2:2 and 4:2:0, the others keep
// image/jpeg's. (The inverse DCTs still differ by a level here and there.)

func jpegYCbCr(format string, m image.Image) (*image.YCbCr, bool) {
	if format != "jpeg" {
		return nil, false
	}
	yc, ok := m.(*image.YCbCr)
	if !ok || yc.Rect.Min != (image.Point{}) {
		return nil, false
	}
	switch yc.SubsampleRatio {
	case image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420:
		return yc, true
	}
	return nil, false
}

// libjpeg's ycc_rgb_convert tables: SCALEBITS 16, ONE_HALF 1<<15.
var jpegCrR, jpegCbB, jpegCrG, jpegCbG [256]int

func init() {
	const scale, half = 16, 1 << 15
	fix := func(x float64) int { return int(x*(1<<scale) + 0.5) }
	for i := 0; i < 256; i++ {
		x := i - 128
		jpegCrR[i] = (fix(1.40200)*x + half) >> scale
		jpegCbB[i] = (fix(1.77200)*x + half) >> scale
		jpegCrG[i] = -fix(0.71414) * x
		jpegCbG[i] = -fix(0.34414)*x + half
	}
}

func clampByte(v int) uint8 { return uint8(min(255, max(0, v))) }

func jpegPixel(dst []uint8, y, cb, cr int) {
	dst[0] = clampByte(y + jpegCrR[cr])
	dst[1] = clampByte(y + (jpegCbG[cb]+jpegCrG[cr])>>16)
	dst[2] = clampByte(y + jpegCbB[cb])
}

// fancyRowH2V2 is the horizontal step of libjpeg's h2v2_fancy_upsample on
// one row of column sums (3 × the nearer chroma row + the farther), into w
// samples, with its alternating rounding (8, 7) and edges.
func fancyRowH2V2(sum []int, w int, out []int) {
	n := len(sum)
	if n == 1 {
		for x := 0; x < w; x++ {
			out[x] = (sum[0]*4 + 8) >> 4
		}
		return
	}
	o := make([]int, 0, 2*n)
	o = append(o, (sum[0]*4+8)>>4, (sum[0]*3+sum[1]+7)>>4)
	for i := 1; i < n-1; i++ {
		o = append(o, (sum[i]*3+sum[i-1]+8)>>4, (sum[i]*3+sum[i+1]+7)>>4)
	}
	o = append(o, (sum[n-1]*3+sum[n-2]+8)>>4, (sum[n-1]*4+7)>>4)
	copy(out[:w], o)
}

// fancyRowH2V1 is libjpeg's h2v1_fancy_upsample of one chroma row into w
// samples.
func fancyRowH2V1(in []uint8, w int, out []int) {
	n := len(in)
	if n == 1 {
		for x := 0; x < w; x++ {
			out[x] = int(in[0])
		}
		return
	}
	o := make([]int, 0, 2*n)
	o = append(o, int(in[0]), (int(in[0])*3+int(in[1])+2)>>2)
	for i := 1; i < n-1; i++ {
		v := int(in[i]) * 3
		o = append(o, (v+int(in[i-1])+1)>>2, (v+int(in[i+1])+2)>>2)
	}
	o = append(o, (int(in[n-1])*3+int(in[n-2])+1)>>2, int(in[n-1]))
	copy(out[:w], o)
}

func jpegToRGB(m *image.YCbCr) *RGB {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	out := &RGB{Width: w, Height: h, Pix: make([]uint8, 3*w*h)}
	cw, ch := w, h
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio422:
		cw = (w + 1) / 2
	case image.YCbCrSubsampleRatio420:
		cw, ch = (w+1)/2, (h+1)/2
	}
	row := func(plane []uint8, k int) []uint8 { return plane[k*m.CStride : k*m.CStride+cw] }
	u, v := make([]int, w), make([]int, w)
	su, sv := make([]int, cw), make([]int, cw)
	for y := 0; y < h; y++ {
		switch m.SubsampleRatio {
		case image.YCbCrSubsampleRatio444:
			cb, cr := row(m.Cb, y), row(m.Cr, y)
			for x := 0; x < w; x++ {
				u[x], v[x] = int(cb[x]), int(cr[x])
			}
		case image.YCbCrSubsampleRatio422:
			fancyRowH2V1(row(m.Cb, y), w, u)
			fancyRowH2V1(row(m.Cr, y), w, v)
		case image.YCbCrSubsampleRatio420:
			// The nearest chroma row, and the next nearest: above for an
			// even output row, below for an odd one, replicated at the
			// image's top and bottom.
			k := y / 2
			k1 := k - 1
			if y%2 == 1 {
				k1 = k + 1
			}
			k1 = min(max(k1, 0), ch-1)
			for _, p := range [2]struct {
				plane []uint8
				sum   []int
				out   []int
			}{{m.Cb, su, u}, {m.Cr, sv, v}} {
				near, far := row(p.plane, k), row(p.plane, k1)
				for x := 0; x < cw; x++ {
					p.sum[x] = int(near[x])*3 + int(far[x])
				}
				fancyRowH2V2(p.sum, w, p.out)
			}
		}
		ys := m.Y[y*m.YStride:]
		dst := out.Pix[3*y*w:]
		for x := 0; x < w; x++ {
			jpegPixel(dst[3*x:], int(ys[x]), u[x], v[x])
		}
	}
	return out
}
