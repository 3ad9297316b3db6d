package gpu

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// Options configure the backend. The zero value works.
type Options struct {
	// KVCacheF32 stores keys and values in f32 instead of bf16: twice the
	// cache memory, no rounding of the cached keys and values.
	KVCacheF32 bool
	// OwnDevice makes Close close the device too, for callers that open a
	// device only for this backend.
	OwnDevice bool
	// Sampler chooses tokens for the sampling parameters the device does
	// not run (top-k off or above 256); nil means engine/sample's.
	Sampler model.Sampler
	// GEMMOperands is the element type the prefill GEMMs (dense and
	// grouped expert) stage their tiles in; the zero value is half.
	GEMMOperands Operands
	// CommandBufferBytes bounds the planned work (declared read and write
	// bytes) of one command buffer of a pass with more than one row per
	// sequence: past it the pass continues in another buffer at the next
	// barrier. 0 means DefaultCommandBufferBytes. A decode step is never
	// split.
	CommandBufferBytes int64
}

// Operands is the element type of the prefill GEMMs' staged tiles; the
// accumulators are f32 either way.
type Operands int

const (
	// HalfOperands stages activations and dequantized weights as half:
	// half the threadgroup memory and bandwidth of f32 tiles, each operand
	// rounded to 11 significant bits, values clamped to ±65504.
	HalfOperands Operands = iota
	// FloatOperands stages them as f32: exact operands, smaller tiles.
	FloatOperands
)

// String gives the name ParseOperands reads.
func (o Operands) String() string {
	if o == FloatOperands {
		return "float"
	}
	return "half"
}

// ParseOperands reads "half" or "float" (as for a command-line flag).
func ParseOperands(s string) (Operands, error) {
	switch s {
	case "half", "":
		return HalfOperands, nil
	case "float", "f32":
		return FloatOperands, nil
	}
	return 0, fmt.Errorf("GEMM operands %q: want half or float", s)
}

// Backend is the GPU implementation of model.Backend over one device.
type Backend struct {
	dev device.Device
	w   *model.Weights
	cfg model.Config
	opt Options

	mu    sync.Mutex
	pipes map[string]device.Pipeline

	wm      *weightMap
	mats    map[*model.Matrix]*devMatrix
	experts map[*model.MoE]*devMoE
	vecs    map[*float32]device.Buffer // norm vectors etc., keyed by &v[0]
	deltas  map[*model.DeltaNet]*devDeltaNet
	invFreq device.Buffer
	towers  map[*model.VisionWeights]*devVision // uploaded on the first image

	sampler model.Sampler
	stats   Stats
	slots   [2]*passScratch // scratch of passes in flight, by pass parity
	count   int             // passes begun
}

// devMoE is one layer's experts as the kernels read them.
type devMoE struct {
	gate, up, down   *devExperts
	router, sharedGG *devMatrix // router [E,H] and the shared expert's gate [1,H]
	sGate, sUp       *devMatrix
	sDown            *devMatrix
}

// dnL2Eps is the epsilon of the q/k L2 normalisation that deltanet.metal
// has built in (transformers' fixed value).
const dnL2Eps = 1e-6

// devDeltaNet holds the DeltaNet's small f32 parameters on the device.
type devDeltaNet struct {
	conv, aLog, dtBias, norm device.Buffer
}

var _ model.Backend = (*Backend)(nil)

// New prepares w on dev: it wraps the checkpoint's mapped tensors in place,
// uploads the small f32 vectors, builds the experts' offset tables, and
// checks every shape a kernel depends on.
func New(dev device.Device, w *model.Weights, opt Options) (*Backend, error) {
	b := &Backend{dev: newTurnDevice(dev), w: w, cfg: w.Config, opt: opt,
		pipes: map[string]device.Pipeline{}, mats: map[*model.Matrix]*devMatrix{},
		experts: map[*model.MoE]*devMoE{}, vecs: map[*float32]device.Buffer{},
		deltas: map[*model.DeltaNet]*devDeltaNet{}, sampler: opt.Sampler}
	if b.sampler == nil {
		b.sampler = sample.New()
	}
	if err := b.checkConfig(); err != nil {
		return nil, err
	}
	if err := b.bindWeights(); err != nil {
		return nil, err
	}
	return b, nil
}

// Name implements model.Backend.
func (b *Backend) Name() string { return "gpu: " + b.dev.Name() }

// Close implements model.Backend. The device belongs to the caller unless
// Options.OwnDevice is set.
func (b *Backend) Close() error {
	if b.opt.OwnDevice {
		return b.dev.Close()
	}
	return nil
}

// Stats returns the counters accumulated since the backend was made.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// StatsLines is Stats().Lines(): the counters in words, one per line, for
// `suzuran logits --stats` and the benchmark.
func (b *Backend) StatsLines() []string { return b.Stats().Lines() }

func (b *Backend) pipeline(name string) (device.Pipeline, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.pipes[name]; ok {
		return p, nil
	}
	p, err := b.dev.Pipeline(name)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", name, err)
	}
	b.pipes[name] = p
	return p, nil
}

func (b *Backend) checkConfig() error {
	c := &b.cfg
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(len(b.w.Layers) == c.NumLayers && c.NumLayers > 0, "weights have %d layers, config says %d", len(b.w.Layers), c.NumLayers)
	check(c.HeadDim <= attnMaxDim, "head_dim %d: the attention kernels hold at most %d", c.HeadDim, attnMaxDim)
	check(c.RotaryDim%2 == 0 && c.RotaryDim <= c.HeadDim, "rotary dims %d must be even and at most head_dim %d", c.RotaryDim, c.HeadDim)
	check(c.NumKVHeads > 0 && c.NumHeads%c.NumKVHeads == 0, "%d query heads do not share %d kv heads evenly", c.NumHeads, c.NumKVHeads)
	check(c.NumKVHeads > 0 && c.NumHeads/c.NumKVHeads <= 32, "%d query heads per kv head: the decode attention kernel serves at most 32", c.NumHeads/max(c.NumKVHeads, 1))
	check(c.LinearKeyHeadDim <= dnMaxKeyDim, "linear_key_head_dim %d: the DeltaNet kernel holds at most %d", c.LinearKeyHeadDim, dnMaxKeyDim)
	check(c.DeltaNetL2Eps == dnL2Eps, "DeltaNet q/k L2 epsilon %g: the DeltaNet kernel has %g built in", c.DeltaNetL2Eps, dnL2Eps)
	check(c.LinearKeyHeads > 0 && c.LinearValueHeads%c.LinearKeyHeads == 0, "%d value heads do not share %d key heads evenly", c.LinearValueHeads, c.LinearKeyHeads)
	check(c.ConvKernel >= 1 && c.ConvKernel <= convMaxKernel, "linear_conv_kernel_dim %d: the conv kernel takes 1..%d", c.ConvKernel, convMaxKernel)
	check(c.NumExperts <= moeMaxExperts, "%d experts: the router kernel handles at most %d", c.NumExperts, moeMaxExperts)
	check(c.ExpertsPerToken >= 1 && c.ExpertsPerToken <= moeMaxTopK && c.ExpertsPerToken <= c.NumExperts,
		"num_experts_per_tok %d: the router kernel picks 1..%d", c.ExpertsPerToken, moeMaxTopK)
	return errors.Join(errs...)
}

// matrices lists every dense matrix of the model.
func (b *Backend) matrices() []*model.Matrix {
	w := b.w
	ms := []*model.Matrix{&w.Embed, &w.LMHead}
	for i := range w.Layers {
		l := &w.Layers[i]
		if d := l.DeltaNet; d != nil {
			ms = append(ms, &d.QKV, &d.Z, &d.B, &d.A, &d.Out)
		}
		if a := l.Attention; a != nil {
			ms = append(ms, &a.Q, &a.K, &a.V, &a.O)
		}
		m := &l.MoE
		ms = append(ms, &m.Router, &m.SharedGate, &m.SharedUp, &m.SharedDown, &m.SharedExpert)
	}
	return ms
}

func (b *Backend) bindWeights() error {
	mi := newMappingIndex(b.w.Mappings)
	var spans []span
	for _, m := range b.matrices() {
		if m.Out == 0 {
			return fmt.Errorf("matrix %s is missing", m.Name)
		}
		spans = append(spans, matrixSpans(m)...)
	}
	for i := range b.w.Layers {
		m := &b.w.Layers[i].MoE
		for _, es := range []model.Experts{m.Gate, m.Up, m.Down} {
			if len(es) != b.cfg.NumExperts {
				return fmt.Errorf("layer %d: %d experts bound, config says %d", i, len(es), b.cfg.NumExperts)
			}
			spans = append(spans, wrappableStackSpans(es, mi)...)
		}
	}
	wm, err := wrapWeights(b.dev, spans, b.w.Mappings)
	if err != nil {
		return err
	}
	b.wm = wm
	for _, m := range b.matrices() {
		d, err := wm.matrix(m)
		if err != nil {
			return err
		}
		b.mats[m] = d
	}
	c := &b.cfg
	for i := range b.w.Layers {
		l := &b.w.Layers[i]
		if err := b.bindLayer(i, l); err != nil {
			return err
		}
		if err := b.vector(l.InputNorm, c.HiddenSize, fmt.Sprintf("layer %d input norm", i)); err != nil {
			return err
		}
		if err := b.vector(l.PostNorm, c.HiddenSize, fmt.Sprintf("layer %d post-attention norm", i)); err != nil {
			return err
		}
	}
	if err := b.vector(b.w.FinalNorm, c.HiddenSize, "final norm"); err != nil {
		return err
	}
	// inv_freq in float64 then rounded, as the reference computes it.
	half := c.RotaryDim / 2
	inv := make([]float32, max(half, 1))
	for i := 0; i < half; i++ {
		inv[i] = float32(math.Pow(c.RopeTheta, -float64(2*i)/float64(c.RotaryDim)))
	}
	b.invFreq, err = upload(b.dev, f32Bytes(inv))
	return err
}

func (b *Backend) bindLayer(i int, l *model.Layer) error {
	c := &b.cfg
	if d := l.DeltaNet; d != nil {
		channels := 2*c.LinearKeyHeads*c.LinearKeyHeadDim + c.LinearValueHeads*c.LinearValueHeadDim
		if len(d.Conv) != channels {
			return fmt.Errorf("layer %d: conv1d has %d channels, config says %d", i, len(d.Conv), channels)
		}
		flat := make([]float32, 0, channels*c.ConvKernel)
		for ch, taps := range d.Conv {
			if len(taps) != c.ConvKernel {
				return fmt.Errorf("layer %d: conv1d channel %d has %d taps, config says %d", i, ch, len(taps), c.ConvKernel)
			}
			flat = append(flat, taps...)
		}
		if len(d.ALog) != c.LinearValueHeads || len(d.DtBias) != c.LinearValueHeads || len(d.Norm) != c.LinearValueHeadDim {
			return fmt.Errorf("layer %d: A_log/dt_bias/norm have %d/%d/%d values, config says %d/%d/%d", i,
				len(d.ALog), len(d.DtBias), len(d.Norm), c.LinearValueHeads, c.LinearValueHeads, c.LinearValueHeadDim)
		}
		dd := &devDeltaNet{}
		var err error
		for _, u := range []struct {
			dst *device.Buffer
			v   []float32
		}{{&dd.conv, flat}, {&dd.aLog, d.ALog}, {&dd.dtBias, d.DtBias}, {&dd.norm, d.Norm}} {
			if *u.dst, err = upload(b.dev, f32Bytes(u.v)); err != nil {
				return err
			}
		}
		b.deltas[d] = dd
	}
	if a := l.Attention; a != nil {
		if err := b.vector(a.QNorm, c.HeadDim, fmt.Sprintf("layer %d q_norm", i)); err != nil {
			return err
		}
		if err := b.vector(a.KNorm, c.HeadDim, fmt.Sprintf("layer %d k_norm", i)); err != nil {
			return err
		}
	}
	m := &l.MoE
	dm := &devMoE{router: b.mats[&m.Router], sharedGG: b.mats[&m.SharedExpert],
		sGate: b.mats[&m.SharedGate], sUp: b.mats[&m.SharedUp], sDown: b.mats[&m.SharedDown]}
	var err error
	if dm.gate, err = b.wm.experts(b.dev, m.Gate); err != nil {
		return fmt.Errorf("layer %d experts: %w", i, err)
	}
	if dm.up, err = b.wm.experts(b.dev, m.Up); err != nil {
		return fmt.Errorf("layer %d experts: %w", i, err)
	}
	if dm.down, err = b.wm.experts(b.dev, m.Down); err != nil {
		return fmt.Errorf("layer %d experts: %w", i, err)
	}
	if dm.gate.format != dm.up.format || dm.gate.groupSize != dm.up.groupSize || dm.gate.out != dm.up.out ||
		dm.sGate.format != dm.sUp.format || dm.sGate.m.GroupSize != dm.sUp.m.GroupSize || dm.sGate.m.Out != dm.sUp.m.Out {
		return fmt.Errorf("layer %d: the gate and up projections of the experts differ in format or shape; the expert kernel reads them as one pair", i)
	}
	for _, pair := range [][2]string{{dm.gate.format, dm.sGate.format}, {dm.up.format, dm.sUp.format}, {dm.down.format, dm.sDown.format}} {
		if pair[0] != pair[1] {
			return fmt.Errorf("layer %d: routed experts are %s but the shared expert is %s; the expert kernels read both with one format",
				i, pair[0], pair[1])
		}
	}
	b.experts[m] = dm
	return nil
}

// vector uploads a norm vector, keyed by its first element.
func (b *Backend) vector(v []float32, want int, what string) error {
	if len(v) != want {
		return fmt.Errorf("%s has %d values, config says %d", what, len(v), want)
	}
	if _, ok := b.vecs[&v[0]]; ok {
		return nil
	}
	buf, err := upload(b.dev, f32Bytes(v))
	if err != nil {
		return err
	}
	b.vecs[&v[0]] = buf
	return nil
}

// vec returns the device copy of a vector uploaded by vector.
func (b *Backend) vec(v []float32) (loc, error) {
	if len(v) == 0 {
		return loc{}, fmt.Errorf("empty weight vector")
	}
	buf, ok := b.vecs[&v[0]]
	if !ok {
		return loc{}, fmt.Errorf("a weight vector at %p was not prepared for the device: blocks must receive the backend's own Weights", unsafe.Pointer(&v[0]))
	}
	return loc{buf: buf}, nil
}
