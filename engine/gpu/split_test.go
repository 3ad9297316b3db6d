package gpu

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// eventDevice is the emu device logging, in order, each command buffer's
// commit and wait and the bytes its dispatches declare.
type eventDevice struct {
	device.Device
	mu     sync.Mutex
	events []string // "commit N" or "wait N", N counting buffers from 1
	bytes  []int64  // by buffer
}

func (d *eventDevice) NewCommandBuffer() (device.CommandBuffer, error) {
	cb, err := d.Device.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bytes = append(d.bytes, 0)
	return &eventBuffer{CommandBuffer: cb, d: d, n: len(d.bytes)}, nil
}

// since returns the events and per-buffer bytes after the first from
// buffers and events.
func (d *eventDevice) since(buffers, events int) ([]string, []int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.events[events:]), slices.Clone(d.bytes[buffers:])
}

func (d *eventDevice) counts() (buffers, events int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.bytes), len(d.events)
}

type eventBuffer struct {
	device.CommandBuffer
	d *eventDevice
	n int
}

func (c *eventBuffer) Dispatch(ds device.Dispatch) {
	c.d.mu.Lock()
	c.d.bytes[c.n-1] += ds.ReadBytes + ds.WriteBytes
	c.d.mu.Unlock()
	c.CommandBuffer.Dispatch(ds)
}

func (c *eventBuffer) Commit() {
	c.d.mu.Lock()
	c.d.events = append(c.d.events, fmt.Sprint("commit ", c.n))
	c.d.mu.Unlock()
	c.CommandBuffer.Commit()
}

func (c *eventBuffer) Wait() error {
	c.d.mu.Lock()
	c.d.events = append(c.d.events, fmt.Sprint("wait ", c.n))
	c.d.mu.Unlock()
	return c.CommandBuffer.Wait()
}

// TestPrefillSplitsCommandBuffers runs a 24-token prompt of the tiny
// fixture model and two greedy decode steps, once with the default bound
// on a command buffer's planned work (the prompt fits one buffer) and once
// with a quarter of the prompt's planned bytes as the bound. The prompt
// must then run in several command buffers, each but the last holding at
// least the bound, all committed before the host waits on any (no readback
// between them), with the same logits bit for bit (the same dispatches in
// the same order) and the same tokens; each decode step stays one buffer.
func TestPrefillSplitsCommandBuffers(t *testing.T) {
	m, err := checkpoint.Load(fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	w := m.Weights
	prompt := make([]int, 24)
	for i := range prompt {
		prompt[i] = (7 + 31*i) % w.Config.VocabSize
	}
	type run struct {
		logits      [][]float32
		tokens      []int
		stats       Stats
		events      []string
		bufferBytes []int64
	}
	generate := func(limit int64) run {
		dev := &eventDevice{Device: openTestDevice(t, 0)}
		b, err := New(dev, w, Options{CommandBufferBytes: limit})
		if err != nil {
			t.Fatal(err)
		}
		seq, err := b.NewSequence(len(prompt) + 8)
		if err != nil {
			t.Fatal(err)
		}
		defer seq.Close()
		var r run
		in := model.Input{IDs: prompt, Sample: &model.Sampling{}, Logits: model.LogitsAll}
		for step := 0; step < 3; step++ {
			res, err := model.Run(b, w, seq, in)
			if err != nil {
				t.Fatal(err)
			}
			if step == 0 {
				r.events, r.bufferBytes = dev.since(0, 0)
			}
			r.logits = append(r.logits, res.Logits)
			r.tokens = append(r.tokens, res.Token)
			in = model.Input{Sample: &model.Sampling{}, Logits: model.LogitsLast}
		}
		r.stats = b.Stats()
		return r
	}
	whole := generate(0)
	if whole.stats.Prefill.CommandBuffers != 1 {
		t.Fatalf("the prompt under the default bound ran in %d command buffers, want 1", whole.stats.Prefill.CommandBuffers)
	}
	planned := whole.stats.Prefill.ReadBytes + whole.stats.Prefill.WriteBytes
	limit := planned / 4
	split := generate(limit)

	p, d := split.stats.Prefill, split.stats.Decode
	t.Logf("prompt of %d tokens: %d planned bytes, bound %d: %d command buffers of %v bytes", len(prompt), planned, limit, p.CommandBuffers, split.bufferBytes)
	if p.Passes != 1 || p.CommandBuffers < 3 || int(p.CommandBuffers) != len(split.bufferBytes) {
		t.Errorf("the prompt ran as %d passes in %d command buffers (the device made %d), want one pass in 3 or more", p.Passes, p.CommandBuffers, len(split.bufferBytes))
	}
	for i, n := range split.bufferBytes[:len(split.bufferBytes)-1] {
		if n < limit {
			t.Errorf("command buffer %d of the prompt holds %d planned bytes, under the bound %d: it was cut early", i+1, n, limit)
		}
	}
	// Every part committed before the first wait: the host reads nothing
	// between them.
	var want []string
	for i := range split.bufferBytes {
		want = append(want, fmt.Sprint("commit ", i+1))
	}
	for i := range split.bufferBytes {
		want = append(want, fmt.Sprint("wait ", i+1))
	}
	if !slices.Equal(split.events, want) {
		t.Errorf("device events of the prompt's pass: %s, want %s", strings.Join(split.events, ", "), strings.Join(want, ", "))
	}
	if p.HostWaits != 1 || p.MidStepReadbacks != 0 || d.MidStepReadbacks != 0 {
		t.Errorf("prompt: %d host waits, %d mid-step readbacks; decode: %d mid-step readbacks; want 1, 0, 0", p.HostWaits, p.MidStepReadbacks, d.MidStepReadbacks)
	}
	if d.Passes != 2 || d.CommandBuffers != d.Passes {
		t.Errorf("%d decode steps in %d command buffers, want 2 in one each", d.Passes, d.CommandBuffers)
	}
	if sum := func(bs []int64) (s int64) {
		for _, b := range bs {
			s += b
		}
		return s
	}(split.bufferBytes); sum != planned || split.stats.Prefill.Dispatches != whole.stats.Prefill.Dispatches {
		t.Errorf("split prompt: %d planned bytes in %d dispatches; whole: %d in %d", sum, split.stats.Prefill.Dispatches, planned, whole.stats.Prefill.Dispatches)
	}
	if !slices.Equal(split.tokens, whole.tokens) {
		t.Errorf("tokens %v split, %v whole", split.tokens, whole.tokens)
	}
	for i := range whole.logits {
		if len(whole.logits[i]) == 0 || !slices.Equal(split.logits[i], whole.logits[i]) {
			t.Fatalf("pass %d: the logits of the split run differ from the whole run's", i)
		}
	}
}

// TestPrefillPlannedBytes records, and abandons unrun, one 512-token
// prefill chunk (engine.Options.PrefillChunk's default) of the benchmark's
// synthetic checkpoint: the real model's width and 4-bit layout, 4 of its
// 40 layers. The planned bytes per layer, times 40, are what one buffer
// would hold for the full model; DefaultCommandBufferBytes must split that
// into several buffers, each of a few layers.
func TestPrefillPlannedBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("maps the 460 MB synthetic checkpoint")
	}
	m, err := checkpoint.Load(syntheticCheckpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := New(openTestDevice(t, 0), m.Weights, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := b.NewSequence(512)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	ids := make([]int, 512)
	for i := range ids {
		ids[i] = 1000 + 13*i
	}
	in := model.Input{IDs: ids, Logits: model.LogitsNone}
	segs := []model.Segment{{Seq: seq, In: in}}
	p, err := b.Begin(segs)
	if err != nil {
		t.Fatal(err)
	}
	model.Forward(p, m.Weights, segs)
	parts := p.(*pass).enc.cb.(*splitBuffer).Parts()
	planned := p.(*pass).cnt.ReadBytes + p.(*pass).cnt.WriteBytes
	p.(model.Abandoner).Abandon()
	layers := len(m.Weights.Layers)
	full := planned / int64(layers) * 40
	t.Logf("512-token chunk, %d layers: %.2f GB planned, %d command buffers; 40 layers: about %.1f GB, %d buffers of at most %.2f GB",
		layers, float64(planned)/1e9, parts, float64(full)/1e9, (full+DefaultCommandBufferBytes-1)/DefaultCommandBufferBytes, float64(DefaultCommandBufferBytes)/1e9)
	if full <= 2*DefaultCommandBufferBytes {
		t.Errorf("a 512-token chunk of the full model plans %.1f GB: DefaultCommandBufferBytes (%.1f GB) hardly splits it", float64(full)/1e9, float64(DefaultCommandBufferBytes)/1e9)
	}
	if seq.Pos() != 0 {
		t.Errorf("the abandoned chunk left %d tokens in the sequence", seq.Pos())
	}
}
