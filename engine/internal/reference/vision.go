package reference

import (
	"math"

	"github.com/suzuran-app/suzuran/engine/model"
)

// The vision tower composed of its steps, one function per block of
// MODEL.md's vision section, and the text model's image inputs.

// VisionTower is one image's embeddings, [Tokens, OutHidden]: the patch
// embedding plus the interpolated position embedding, the blocks with the
// 2-D rotary embedding, then the merger.
func VisionTower(w *model.VisionWeights, im *model.Image) [][]float64 {
	c := &w.Config
	x := PatchEmbed(w, im.Pixels)
	pos := PositionEmbeddings(w, im.Grid)
	for t := range x {
		for d := range x[t] {
			x[t][d] += pos[t][d]
		}
	}
	angles := VisionRopeAngles(c, im.Grid)
	for i := range w.Blocks {
		x = VisionBlock(c, &w.Blocks[i], x, angles, im.Grid)
	}
	return Merger(c, &w.Merger, x)
}

// PatchEmbed is each patch's pixel row times the projection, plus its bias.
func PatchEmbed(w *model.VisionWeights, pixels []float32) [][]float64 {
	n := w.PatchEmbed.In
	rows := make([][]float64, len(pixels)/n)
	for t := range rows {
		rows[t] = Float64(pixels[t*n : (t+1)*n])
	}
	return AddBias(LinearRows(&w.PatchEmbed, rows), w.PatchEmbedBias)
}

// AddBias adds b to every row of x, in place, and returns x.
func AddBias(x [][]float64, b []float32) [][]float64 {
	for _, r := range x {
		for i := range r {
			r[i] += float64(b[i])
		}
	}
	return x
}

// PatchCoords are each patch's (row, column) in the image's patch grid, in
// the processor's order: merge groups row-major over the merged grid, each
// group's SpatialMerge² patches row-major; frames one after another.
func PatchCoords(c *model.VisionConfig, grid [3]int) [][2]int {
	m := c.SpatialMerge
	var out [][2]int
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

// PositionEmbeddings are the learned position embeddings resampled to the
// image's grid (fast_pos_embed_interpolate): the G×G table sampled
// bilinearly at h·(G−1)/(H−1), w·(G−1)/(W−1) (align_corners), in patch order.
func PositionEmbeddings(w *model.VisionWeights, grid [3]int) [][]float64 {
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
	var out [][]float64
	for _, hw := range PatchCoords(c, grid) {
		h0, h1, dh := at(hw[0], grid[1])
		w0, w1, dw := at(hw[1], grid[2])
		row := make([]float64, D)
		for _, corner := range []struct {
			idx    int
			weight float64
		}{
			{h0*G + w0, (1 - dh) * (1 - dw)}, {h0*G + w1, (1 - dh) * dw},
			{h1*G + w0, dh * (1 - dw)}, {h1*G + w1, dh * dw},
		} {
			for d := range D {
				row[d] += corner.weight * float64(w.PosEmbed[corner.idx*D+d])
			}
		}
		out = append(out, row)
	}
	return out
}

// VisionRopeAngles are each patch's rotation angles: with D the head width
// and inv_freq[i] = theta^(−4i/D) for i < D/4, the first D/4 angles are
// row·inv_freq, the next D/4 column·inv_freq; Rotate pairs dim i with
// i+D/2.
func VisionRopeAngles(c *model.VisionConfig, grid [3]int) [][]float64 {
	D := c.HeadDim()
	q := D / 4
	var out [][]float64
	for _, hw := range PatchCoords(c, grid) {
		a := make([]float64, 2*q)
		for i := range q {
			inv := math.Pow(c.RopeTheta, -float64(2*i)/float64(D/2))
			a[i] = float64(hw[0]) * inv
			a[q+i] = float64(hw[1]) * inv
		}
		out = append(out, a)
	}
	return out
}

// LayerNorm is (x − mean)/sqrt(var + eps)·w + b, the variance biased.
func LayerNorm(x []float64, w, b []float32, eps float64) []float64 {
	var mean, v float64
	for _, e := range x {
		mean += e
	}
	mean /= float64(len(x))
	for _, e := range x {
		v += (e - mean) * (e - mean)
	}
	r := 1 / math.Sqrt(v/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, e := range x {
		out[i] = (e-mean)*r*float64(w[i]) + float64(b[i])
	}
	return out
}

// LayerNormRows is LayerNorm of each row.
func LayerNormRows(x [][]float64, w, b []float32, eps float64) [][]float64 {
	out := make([][]float64, len(x))
	for t, r := range x {
		out[t] = LayerNorm(r, w, b, eps)
	}
	return out
}

// GELUTanh is 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))).
func GELUTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// GELU is 0.5·x·(1 + erf(x/√2)).
func GELU(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

// VisionBlock is x + Attn(LN1(x)), then + MLP(LN2(·)).
func VisionBlock(c *model.VisionConfig, w *model.VisionBlock, x [][]float64, angles [][]float64, grid [3]int) [][]float64 {
	h := Add(x, VisionAttention(c, w, LayerNormRows(x, w.Norm1, w.Norm1Bias, c.LayerNormEps), angles, grid))
	return Add(h, VisionMLP(w, LayerNormRows(h, w.Norm2, w.Norm2Bias, c.LayerNormEps)))
}

// VisionAttention is bidirectional attention among the patches of each
// frame: qkv with bias, q and k rotated, softmax(q·kᵀ/√D)·v per head, the
// output projection with bias.
func VisionAttention(c *model.VisionConfig, w *model.VisionBlock, x [][]float64, angles [][]float64, grid [3]int) [][]float64 {
	H, D, W := c.NumHeads, c.HeadDim(), c.HiddenSize
	qkv := AddBias(LinearRows(&w.QKV, x), w.QKVBias)
	frame := grid[1] * grid[2]
	o := make([][]float64, len(x))
	for t := range x {
		o[t] = make([]float64, W)
	}
	for f0 := 0; f0 < len(x); f0 += frame {
		for h := range H {
			keys, values := make([][]float64, frame), make([][]float64, frame)
			for j := range frame {
				keys[j] = Rotate(qkv[f0+j][W+h*D:W+(h+1)*D], angles[f0+j])
				values[j] = qkv[f0+j][2*W+h*D : 2*W+(h+1)*D]
			}
			for i := range frame {
				q := Rotate(qkv[f0+i][h*D:(h+1)*D], angles[f0+i])
				copy(o[f0+i][h*D:], Attend(q, keys, values))
			}
		}
	}
	return AddBias(LinearRows(&w.Proj, o), w.ProjBias)
}

// Attend is softmax(q·kᵀ/√D)·v over every key.
func Attend(q []float64, keys, values [][]float64) []float64 {
	scores := make([]float64, len(keys))
	scale := 1 / math.Sqrt(float64(len(q)))
	for j, k := range keys {
		for d := range q {
			scores[j] += q[d] * k[d]
		}
		scores[j] *= scale
	}
	p := Softmax(scores)
	out := make([]float64, len(values[0]))
	for j, v := range values {
		for d := range out {
			out[d] += p[j] * v[d]
		}
	}
	return out
}

// VisionMLP is fc2(gelu_tanh(fc1(x) + b1)) + b2.
func VisionMLP(w *model.VisionBlock, x [][]float64) [][]float64 {
	h := AddBias(LinearRows(&w.FC1, x), w.FC1Bias)
	for _, r := range h {
		for i := range r {
			r[i] = GELUTanh(r[i])
		}
	}
	return AddBias(LinearRows(&w.FC2, h), w.FC2Bias)
}

// Merger is LayerNorm per patch, each SpatialMerge² consecutive patches
// concatenated, then fc2(gelu(fc1(·) + b1)) + b2.
func Merger(c *model.VisionConfig, w *model.VisionMerger, x [][]float64) [][]float64 {
	n := c.SpatialMerge * c.SpatialMerge
	normed := LayerNormRows(x, w.Norm, w.NormBias, c.LayerNormEps)
	groups := make([][]float64, len(x)/n)
	for g := range groups {
		for i := range n {
			groups[g] = append(groups[g], normed[g*n+i]...)
		}
	}
	h := AddBias(LinearRows(&w.FC1, groups), w.FC1Bias)
	for _, r := range h {
		for i := range r {
			r[i] = GELU(r[i])
		}
	}
	return AddBias(LinearRows(&w.FC2, h), w.FC2Bias)
}
