package gpu

import (
	"fmt"
	"math"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/model"
)

// The vision tower on the device: one command buffer per image (or a few,
// each under Options.CommandBufferBytes of planned work), no readback
// inside. The tower's weights are copied into device buffers on
// the first image (they are a few hundred MB at most, read only once an
// image arrives); the host computes only what depends on the grid alone:
// the interpolated position embeddings and the rope's cos/sin tables.

// devVision is a tower's weights on the device.
type devVision struct {
	patch    *devMatrix
	vecs     map[*float32]loc
	blocks   []devVisionBlock
	fc1, fc2 *devMatrix
}

type devVisionBlock struct {
	qkv, proj, fc1, fc2 *devMatrix
}

// uploadMatrix copies m into device buffers of its own.
func (b *Backend) uploadMatrix(m *model.Matrix) (*devMatrix, error) {
	format, err := matrixFormat(m)
	if err != nil {
		return nil, err
	}
	d := &devMatrix{m: m, format: format, bytes: int64(len(m.Data) + len(m.Scales) + len(m.Biases)), aligned: m.RowBytes()%8 == 0}
	for _, part := range []struct {
		dst *loc
		src []byte
	}{{&d.data, m.Data}, {&d.scales, m.Scales}, {&d.biases, m.Biases}} {
		buf, err := upload(b.dev, part.src)
		if err != nil {
			return nil, err
		}
		*part.dst = loc{buf: buf}
	}
	return d, nil
}

// vision returns w's tower on the device, uploading it on first use.
func (b *Backend) vision(w *model.VisionWeights) (*devVision, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.towers == nil {
		b.towers = map[*model.VisionWeights]*devVision{}
	}
	if d, ok := b.towers[w]; ok {
		return d, nil
	}
	d := &devVision{vecs: map[*float32]loc{}}
	var err error
	mat := func(m *model.Matrix) *devMatrix {
		if err != nil {
			return nil
		}
		var dm *devMatrix
		dm, err = b.uploadMatrix(m)
		return dm
	}
	vec := func(v []float32) {
		if err != nil {
			return
		}
		var buf device.Buffer
		if buf, err = upload(b.dev, f32Bytes(v)); err == nil {
			d.vecs[&v[0]] = loc{buf: buf}
		}
	}
	d.patch = mat(&w.PatchEmbed)
	vec(w.PatchEmbedBias)
	for i := range w.Blocks {
		k := &w.Blocks[i]
		d.blocks = append(d.blocks, devVisionBlock{qkv: mat(&k.QKV), proj: mat(&k.Proj), fc1: mat(&k.FC1), fc2: mat(&k.FC2)})
		for _, v := range [][]float32{k.Norm1, k.Norm1Bias, k.QKVBias, k.ProjBias, k.Norm2, k.Norm2Bias, k.FC1Bias, k.FC2Bias} {
			vec(v)
		}
	}
	d.fc1, d.fc2 = mat(&w.Merger.FC1), mat(&w.Merger.FC2)
	for _, v := range [][]float32{w.Merger.Norm, w.Merger.NormBias, w.Merger.FC1Bias, w.Merger.FC2Bias} {
		vec(v)
	}
	if err != nil {
		return nil, fmt.Errorf("uploading the vision tower: %w", err)
	}
	b.towers[w] = d
	return d, nil
}

// EncodeImage implements model.VisionEncoder: the tower of engine/model/MODEL.md in
// one command buffer, or in as few as Options.CommandBufferBytes allows
// (as a prefill pass is cut), run one after another. It may be called
// from another goroutine than the passes': the parts take their turns at
// the device between the passes' recordings (turnDevice), so decode steps
// of other sequences run between them.
func (b *Backend) EncodeImage(w *model.VisionWeights, im *model.Image) ([]float32, error) {
	out, _, err := b.encodeImage(w, im, true)
	return out, err
}

// PlanImage records the command buffer EncodeImage would run for im and
// discards it: the counters (dispatches, planned bytes against the
// minimum) the tower's plan declares, without running it. They are the
// counters a run adds to Stats().Vision, which PlanImage leaves alone.
func (b *Backend) PlanImage(w *model.VisionWeights, im *model.Image) (Counters, error) {
	_, stats, err := b.encodeImage(w, im, false)
	return stats, err
}

func (b *Backend) encodeImage(w *model.VisionWeights, im *model.Image, run bool) ([]float32, Counters, error) {
	var stats Counters
	c := &w.Config
	if err := c.CheckImage(im); err != nil {
		return nil, stats, err
	}
	d, err := b.vision(w)
	if err != nil {
		return nil, stats, err
	}
	N, W, H, D := model.Patches(im.Grid), c.HiddenSize, c.NumHeads, c.HeadDim()
	m2 := c.SpatialMerge * c.SpatialMerge
	acts, err := b.visionActs(w, im)
	if err != nil {
		return nil, stats, err
	}
	defer acts.release()
	pixels, posA, cosA, sinA := acts.pixels, acts.pos, acts.cos, acts.sin
	x, a, o, p, qkv, hid, mh, out := acts.x, acts.a, acts.o, acts.p, acts.qkv, acts.hid, acts.mh, acts.out
	// Recorded on the host, then replayed part by part (runTowerParts).
	cb := newSplitBuffer(b.dev, b.opt.CommandBufferBytes)
	e := &encoder{b: b, cb: cb, stats: &stats}
	ops := b.opt.GEMMOperands
	v := func(s []float32) loc { return d.vecs[&s[0]] }
	eps := float32(c.LayerNormEps)
	e.gemm(d.patch, pixels, x, ops)
	e.biasAct(actNone, x, v(w.PatchEmbedBias))
	e.addRows(x, posA)
	for i := range w.Blocks {
		k, dk := &w.Blocks[i], &d.blocks[i]
		e.layerNormBias(x, v(k.Norm1), v(k.Norm1Bias), eps, a)
		e.gemm(dk.qkv, a, qkv, ops)
		e.biasAct(actNone, qkv, v(k.QKVBias))
		e.ropeTable(qkv.loc, ropeShape{rows: N, heads: 2 * H, headDim: D, stride: 3 * W}, cosA.loc, sinA.loc)
		e.visionAttention(qkv.loc, N, H, D, im.Grid[1]*im.Grid[2], o.loc)
		e.gemm(dk.proj, o, p, ops)
		e.biasAct(actNone, p, v(k.ProjBias))
		e.addRows(x, p)
		e.layerNormBias(x, v(k.Norm2), v(k.Norm2Bias), eps, a)
		e.gemm(dk.fc1, a, hid, ops)
		e.biasAct(actGELUTanh, hid, v(k.FC1Bias))
		e.gemm(dk.fc2, hid, p, ops)
		e.biasAct(actNone, p, v(k.FC2Bias))
		e.addRows(x, p)
	}
	e.layerNormBias(x, v(w.Merger.Norm), v(w.Merger.NormBias), eps, a)
	merged := &act{loc: a.loc, rows: N / m2, width: m2 * W, stride: m2 * W}
	e.gemm(d.fc1, merged, mh, ops)
	e.biasAct(actGELUErf, mh, v(w.Merger.FC1Bias))
	e.gemm(d.fc2, mh, out, ops)
	e.biasAct(actNone, out, v(w.Merger.FC2Bias))
	if e.err != nil {
		return nil, stats, e.err
	}
	stats.Passes, stats.Tokens, stats.Sequences = 1, int64(N/m2), 1
	stats.CommandBuffers, stats.HostWaits = int64(cb.Parts()), int64(cb.Parts())
	stats.MinimumBytes = visionMinimumBytes(d, w, N, c.PatchWidth(), N/m2*c.OutHiddenSize)
	if !run {
		return nil, stats, nil
	}
	if err := b.runTowerParts(cb); err != nil {
		return nil, stats, fmt.Errorf("vision tower: %w", err)
	}
	b.mu.Lock()
	b.stats.Vision.add(stats)
	b.mu.Unlock()
	return floats(out.buf.Bytes()[:4*out.rows*out.width]), stats, nil
}

// visionActs are the device buffers of one image's pass through the tower:
// the uploaded patches, position embeddings and rotary tables, and the
// activations.
type visionActs struct {
	pixels, pos, cos, sin         *act
	x, a, o, p, qkv, hid, mh, out *act
	bufs                          []device.Buffer
}

// visionActs allocates im's buffers for the tower w; on an error it has
// released what it made.
func (b *Backend) visionActs(w *model.VisionWeights, im *model.Image) (*visionActs, error) {
	c := &w.Config
	N, W, D, I := model.Patches(im.Grid), c.HiddenSize, c.HeadDim(), c.Intermediate
	m2 := c.SpatialMerge * c.SpatialMerge
	pos, cosT, sinT := visionHostTables(w, im.Grid)
	v := &visionActs{}
	var err error
	newAct := func(rows, width int, init []float32) *act {
		if err != nil {
			return &act{rows: rows, width: width, stride: width}
		}
		var buf device.Buffer
		if init != nil {
			buf, err = upload(b.dev, f32Bytes(init))
		} else {
			buf, err = b.dev.NewBuffer(4 * rows * width)
		}
		v.bufs = append(v.bufs, buf)
		return &act{loc: loc{buf: buf}, rows: rows, width: width, stride: width}
	}
	v.pixels = newAct(N, c.PatchWidth(), im.Pixels)
	v.pos = newAct(N, W, pos)
	v.cos, v.sin = newAct(N, D/2, cosT), newAct(N, D/2, sinT)
	v.x, v.a, v.o, v.p = newAct(N, W, nil), newAct(N, W, nil), newAct(N, W, nil), newAct(N, W, nil)
	v.qkv, v.hid = newAct(N, 3*W, nil), newAct(N, I, nil)
	v.mh = newAct(N/m2, m2*W, nil)
	v.out = newAct(N/m2, c.OutHiddenSize, nil)
	if err != nil {
		v.release()
		return nil, err
	}
	return v, nil
}

// release releases the buffers.
func (v *visionActs) release() {
	for _, buf := range v.bufs {
		if buf != nil {
			buf.Release()
		}
	}
}

// visionMinimumBytes is the least memory traffic of encoding one image of N
// patches: every weight of the tower read once, the image's f32 pixels read
// and its f32 embeddings written. Activations kept on chip between the
// layers would cost nothing more; the tower's plan writes and reads them.
func visionMinimumBytes(d *devVision, w *model.VisionWeights, N, patchWidth, outFloats int) int64 {
	n := d.patch.bytes + d.fc1.bytes + d.fc2.bytes
	for i := range d.blocks {
		k := &d.blocks[i]
		n += k.qkv.bytes + k.proj.bytes + k.fc1.bytes + k.fc2.bytes
	}
	vec := func(v []float32) int64 { return int64(4 * len(v)) }
	n += vec(w.PatchEmbedBias) + vec(w.Merger.Norm) + vec(w.Merger.NormBias) + vec(w.Merger.FC1Bias) + vec(w.Merger.FC2Bias)
	for i := range w.Blocks {
		k := &w.Blocks[i]
		n += vec(k.Norm1) + vec(k.Norm1Bias) + vec(k.QKVBias) + vec(k.ProjBias) + vec(k.Norm2) + vec(k.Norm2Bias) + vec(k.FC1Bias) + vec(k.FC2Bias)
	}
	return n + int64(4*N*patchWidth) + int64(4*outFloats)
}

// visionHostTables are what depends on the grid alone: each patch's
// position embedding, bilinear from the learned grid (align_corners), and
// the rope's cos and sin, [patches, D/2] as [row·inv_freq ‖ col·inv_freq],
// computed in f32 as transformers does.
func visionHostTables(w *model.VisionWeights, grid [3]int) (pos, cosT, sinT []float32) {
	c := &w.Config
	G, W, D := c.GridSide(), c.HiddenSize, c.HeadDim()
	q := D / 4
	m := c.SpatialMerge
	at := func(i, n int) (lo, hi int, frac float64) {
		f := 0.0
		if n > 1 {
			f = float64(i) * float64(G-1) / float64(n-1)
		}
		lo = int(f)
		return lo, min(lo+1, G-1), f - float64(lo)
	}
	for range grid[0] {
		for bh := range grid[1] / m {
			for bw := range grid[2] / m {
				for i := range m {
					for j := range m {
						r, col := bh*m+i, bw*m+j
						h0, h1, dh := at(r, grid[1])
						w0, w1, dw := at(col, grid[2])
						for dd := range W {
							e := w.PosEmbed
							pos = append(pos, float32((1-dh)*(1-dw)*float64(e[(h0*G+w0)*W+dd])+(1-dh)*dw*float64(e[(h0*G+w1)*W+dd])+
								dh*(1-dw)*float64(e[(h1*G+w0)*W+dd])+dh*dw*float64(e[(h1*G+w1)*W+dd])))
						}
						row := make([]float32, 2*q)
						rs := make([]float32, 2*q)
						for k := range q {
							inv := float32(1 / math.Pow(c.RopeTheta, float64(float32(2*k)/float32(D/2))))
							for axis, val := range [2]int{r, col} {
								angle := float64(float32(val) * inv)
								row[axis*q+k] = float32(math.Cos(angle))
								rs[axis*q+k] = float32(math.Sin(angle))
							}
						}
						cosT, sinT = append(cosT, row...), append(sinT, rs...)
					}
				}
			}
		}
	}
	return pos, cosT, sinT
}

// runTowerParts replays the tower's recorded parts into device command
// buffers, committing each and waiting for it before the next, so that the
// passes committed meanwhile run between them rather than after the whole
// tower. No host read happens in between: the activations stay on the
// device.
func (b *Backend) runTowerParts(s *splitBuffer) error {
	newCB := b.dev.NewCommandBuffer
	if td, ok := b.dev.(*turnDevice); ok {
		newCB = td.towerBuffer
	}
	s.committed = true
	from := 0
	for i := 0; i < s.Parts(); i++ {
		to := len(s.ops)
		if i < len(s.cuts) {
			to = s.cuts[i]
		}
		cb, err := newCB()
		if err != nil {
			return fmt.Errorf("command buffer %d of %d: %w", i+1, s.Parts(), err)
		}
		for _, op := range s.ops[from:to] {
			if op.barrier {
				cb.Barrier()
			} else {
				cb.Dispatch(op.d)
			}
		}
		cb.Commit()
		if err := cb.Wait(); err != nil {
			return fmt.Errorf("command buffer %d of %d: %w", i+1, s.Parts(), err)
		}
		from = to
	}
	s.ops = nil
	return nil
}
