package cpu

import (
	"math"

	"github.com/suzuran-app/suzuran/engine/model"
)

// The vision tower of engine/model/MODEL.md on f32 rows: the matrix
// products go through the backend's matMul (so Options.Precision applies
// to quantized vision Linears as to the text model's), the rest are row
// loops split over the pool.

// ImageInputs implements model.ImageInputs: a pass takes image embeddings
// (Input.Embeds) and M-RoPE positions (Input.Positions).
func (b *Backend) ImageInputs() {}

// EncodeImage implements model.VisionEncoder: one image's embeddings,
// [tokens, OutHiddenSize].
func (b *Backend) EncodeImage(w *model.VisionWeights, im *model.Image) ([]float32, error) {
	c := &w.Config
	if err := c.CheckImage(im); err != nil {
		return nil, err
	}
	N, W := model.Patches(im.Grid), c.HiddenSize
	x := make([]float32, N*W)
	b.linear(x, im.Pixels, N, &w.PatchEmbed, w.PatchEmbedBias)
	addPositionEmbeddings(x, w, im.Grid)
	rope := visionRotary(c, im.Grid)
	for i := range w.Blocks {
		b.visionBlock(c, &w.Blocks[i], x, N, rope, im.Grid)
	}
	return b.merger(c, &w.Merger, x, N), nil
}

// linear is y = x·wᵀ + bias for rows rows.
func (b *Backend) linear(y, x []float32, rows int, w *model.Matrix, bias []float32) {
	b.matMul(y, x, rows, w)
	for t := range rows {
		row := y[t*w.Out : (t+1)*w.Out]
		for i := range row {
			row[i] += bias[i]
		}
	}
}

// patchCoords are each patch's (row, column) in the processor's order:
// merge groups row-major, each group's patches row-major, frame by frame.
func patchCoords(c *model.VisionConfig, grid [3]int) [][2]int {
	m := c.SpatialMerge
	out := make([][2]int, 0, model.Patches(grid))
	for range grid[0] {
		for bh := range grid[1] / m {
			for bw := range grid[2] / m {
				for i := range m {
					for j := range m {
						out = append(out, [2]int{bh*m + i, bw*m + j})
					}
				}
			}
		}
	}
	return out
}

// addPositionEmbeddings adds the learned position embeddings, sampled
// bilinearly (align_corners) from the G×G grid at each patch's place.
func addPositionEmbeddings(x []float32, w *model.VisionWeights, grid [3]int) {
	c := &w.Config
	G, D := c.GridSide(), c.HiddenSize
	at := func(i, n int) (lo, hi int, frac float64) {
		f := 0.0
		if n > 1 {
			f = float64(i) * float64(G-1) / float64(n-1)
		}
		lo = int(f)
		return lo, min(lo+1, G-1), f - float64(lo)
	}
	for t, hw := range patchCoords(c, grid) {
		h0, h1, dh := at(hw[0], grid[1])
		w0, w1, dw := at(hw[1], grid[2])
		i00, i01, i10, i11 := (h0*G+w0)*D, (h0*G+w1)*D, (h1*G+w0)*D, (h1*G+w1)*D
		a, bb, cc, dd := (1-dh)*(1-dw), (1-dh)*dw, dh*(1-dw), dh*dw
		row := x[t*D : (t+1)*D]
		p := w.PosEmbed
		for d := range D {
			row[d] += float32(a*float64(p[i00+d]) + bb*float64(p[i01+d]) + cc*float64(p[i10+d]) + dd*float64(p[i11+d]))
		}
	}
}

// visionRotary is the tower's 2-D rotation of each patch: D/2 angles,
// [row·inv_freq ‖ column·inv_freq], pairing dim i with i+D/2; computed in
// f32 as transformers does.
func visionRotary(c *model.VisionConfig, grid [3]int) rotary {
	D := c.HeadDim()
	q := D / 4
	coords := patchCoords(c, grid)
	r := rotary{half: D / 2, cos: make([]float32, len(coords)*D/2), sin: make([]float32, len(coords)*D/2)}
	for i := range q {
		inv := float32(1 / math.Pow(c.RopeTheta, float64(float32(2*i)/float32(D/2))))
		for t, hw := range coords {
			for axis, v := range hw {
				angle := float64(float32(v) * inv)
				r.cos[t*D/2+axis*q+i] = float32(math.Cos(angle))
				r.sin[t*D/2+axis*q+i] = float32(math.Sin(angle))
			}
		}
	}
	return r
}

// layerNorm is one LayerNorm's weight, bias and epsilon.
type layerNorm struct {
	w, bias []float32
	eps     float64
}

// layerNormRows writes LayerNorm(x) (biased variance, f64 sums) of each
// of x's rows, [rows, width], into y.
func (b *Backend) layerNormRows(y, x []float32, rows, width int, n layerNorm) {
	w, bias, eps := n.w, n.bias, n.eps
	b.pool.parallelFor(rows, 16, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			xr, yr := x[t*width:(t+1)*width], y[t*width:(t+1)*width]
			var mean, v float64
			for _, e := range xr {
				mean += float64(e)
			}
			mean /= float64(width)
			for _, e := range xr {
				v += (float64(e) - mean) * (float64(e) - mean)
			}
			r := 1 / math.Sqrt(v/float64(width)+eps)
			for i, e := range xr {
				yr[i] = float32((float64(e)-mean)*r)*w[i] + bias[i]
			}
		}
	})
}

// visionBlock is x += Attn(LN1(x)); x += MLP(LN2(x)), in place.
func (b *Backend) visionBlock(c *model.VisionConfig, w *model.VisionBlock, x []float32, N int, rope rotary, grid [3]int) {
	W, H, D := c.HiddenSize, c.NumHeads, c.HeadDim()
	a := make([]float32, N*W)
	b.layerNormRows(a, x, N, W, layerNorm{w.Norm1, w.Norm1Bias, c.LayerNormEps})
	qkv := make([]float32, N*3*W)
	b.linear(qkv, a, N, &w.QKV, w.QKVBias)
	b.pool.parallelFor(N, 16, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			for h := range H {
				rope.apply(qkv[t*3*W+h*D:t*3*W+(h+1)*D], t)
				rope.apply(qkv[t*3*W+W+h*D:t*3*W+W+(h+1)*D], t)
			}
		}
	})
	o := a // LN1's output is no longer needed
	frame := grid[1] * grid[2]
	scale := float32(1 / math.Sqrt(float64(D)))
	blocks := (N + 15) / 16
	b.pool.parallelFor(blocks*H, 1, func(lo, hi int) {
		scores := make([]float32, frame)
		for job := lo; job < hi; job++ {
			h, blk := job%H, job/H
			for i := blk * 16; i < min(blk*16+16, N); i++ {
				f0 := i / frame * frame
				q := qkv[i*3*W+h*D : i*3*W+(h+1)*D]
				m := float32(math.Inf(-1))
				for j := range frame {
					k := qkv[(f0+j)*3*W+W+h*D : (f0+j)*3*W+W+(h+1)*D]
					s := dotWith(&b.kern.f32, q, k) * scale
					scores[j] = s
					m = max(m, s)
				}
				var sum float64
				for j := range frame {
					e := math.Exp(float64(scores[j] - m))
					scores[j] = float32(e)
					sum += e
				}
				out := o[i*W+h*D : i*W+(h+1)*D]
				clear(out)
				for j := range frame {
					axpyWith(&b.kern.f32, out, qkv[(f0+j)*3*W+2*W+h*D:(f0+j)*3*W+2*W+(h+1)*D], scores[j])
				}
				inv := float32(1 / sum)
				for d := range out {
					out[d] *= inv
				}
			}
		}
	})
	proj := make([]float32, N*W)
	b.linear(proj, o, N, &w.Proj, w.ProjBias)
	for i := range x {
		x[i] += proj[i]
	}
	b.layerNormRows(a, x, N, W, layerNorm{w.Norm2, w.Norm2Bias, c.LayerNormEps})
	hid := make([]float32, N*c.Intermediate)
	b.linear(hid, a, N, &w.FC1, w.FC1Bias)
	b.pool.parallelFor(len(hid), 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := float64(hid[i])
			hid[i] = float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
		}
	})
	b.linear(proj, hid, N, &w.FC2, w.FC2Bias)
	for i := range x {
		x[i] += proj[i]
	}
}

// merger is LayerNorm per patch, each SpatialMerge² consecutive patches as
// one row, fc1, the erf GELU, fc2.
func (b *Backend) merger(c *model.VisionConfig, w *model.VisionMerger, x []float32, N int) []float32 {
	W := c.HiddenSize
	n := N / (c.SpatialMerge * c.SpatialMerge)
	M := W * c.SpatialMerge * c.SpatialMerge
	normed := make([]float32, N*W)
	b.layerNormRows(normed, x, N, W, layerNorm{w.Norm, w.NormBias, c.LayerNormEps})
	h := make([]float32, n*M)
	b.linear(h, normed, n, &w.FC1, w.FC1Bias)
	for i, v := range h {
		h[i] = float32(0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2)))
	}
	out := make([]float32, n*c.OutHiddenSize)
	b.linear(out, h, n, &w.FC2, w.FC2Bias)
	return out
}
