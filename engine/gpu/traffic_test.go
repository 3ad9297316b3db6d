package gpu

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/synth"
)

// TestBatchedStepTraffic measures, on the benchmark's synthetic checkpoint
// (the real model's width, vocabulary and 4-bit layout, its first four
// layers: three DeltaNet, one attention), what one decode step moves for
// one sequence and for four sequences decoding together, by the emulator's
// counters: the traffic each dispatch declares, less the routed experts
// that several rows chose and the grouped kernels read once. Decode is
// bound by memory bandwidth, so this ratio is what four streams cost
// against one. The goal is under 1.6×: the weights every row uses
// (the mixers, the shared expert, the 248,320-row head) are read once per
// step, while each sequence adds its own routed experts, DeltaNet state
// and KV cache.
func TestBatchedStepTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 460 MB checkpoint and runs full-width steps on the emulator")
	}
	dir := syntheticCheckpoint(t)
	m, err := checkpoint.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	dev := &kernelCounter{Device: openTestDevice(t, 0)}
	b, err := New(dev, m.Weights, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := m.Weights
	greedy := &model.Sampling{}
	segs := make([]model.Segment, 4)
	for i := range segs {
		seq, err := b.NewSequence(16)
		if err != nil {
			t.Fatal(err)
		}
		// One token from the host each: a decode step's rows, with no
		// prefill pass before (the head of the full vocabulary is the
		// emulator's slowest part).
		segs[i] = model.Segment{Seq: seq, In: model.Input{IDs: []int{100 + 37*i}, Sample: greedy}}
	}
	step := func(segs []model.Segment) Counters {
		before := b.Stats().Decode
		dev.reset()
		if _, err := model.RunBatch(b, w, segs); err != nil {
			t.Fatal(err)
		}
		d := b.Stats().Decode
		return Counters{Passes: d.Passes - before.Passes, Sequences: d.Sequences - before.Sequences,
			CommandBuffers: d.CommandBuffers - before.CommandBuffers, Dispatches: d.Dispatches - before.Dispatches,
			ReadBytes: d.ReadBytes - before.ReadBytes, WriteBytes: d.WriteBytes - before.WriteBytes,
			SharedExpertBytes: d.SharedExpertBytes - before.SharedExpertBytes, MinimumBytes: d.MinimumBytes - before.MinimumBytes}
	}
	start := time.Now()
	one := step(segs[:1])
	oneKernels := dev.counts()
	four := step(segs)
	fourKernels := dev.counts()
	t.Logf("two steps on the emulator in %v", time.Since(start).Round(time.Millisecond))
	for _, c := range []struct {
		name string
		c    Counters
	}{{"1 sequence", one}, {"4 sequences", four}} {
		t.Logf("%s: %d command buffer, %d dispatches, %.1f MiB per step (planned %.1f MiB, experts shared by rows %.1f MiB), minimum %.1f MiB",
			c.name, c.c.CommandBuffers, c.c.Dispatches, mib(c.c.StepBytes()), mib(c.c.ReadBytes+c.c.WriteBytes),
			mib(c.c.SharedExpertBytes), mib(c.c.MinimumBytes))
		if c.c.Passes != 1 || c.c.CommandBuffers != 1 {
			t.Errorf("%s: %d passes in %d command buffers, want one step in one buffer", c.name, c.c.Passes, c.c.CommandBuffers)
		}
	}
	// The step's embedding gather and greedy argmax serve every sequence:
	// one gather dispatch and one argmax pair (chunk partials, then the
	// merge) for four sequences as for one, so a step of four records no
	// more dispatches than a step of one.
	for _, c := range []struct {
		name   string
		counts map[string]int
	}{{"1 sequence", oneKernels}, {"4 sequences", fourKernels}} {
		t.Logf("%s: kernels dispatched: %v", c.name, c.counts)
		for _, k := range []string{"embed_seqs_" + b.mats[&w.Embed].format + "_f32", "argmax_partial_seqs_f32", "argmax_final_seqs_i32"} {
			if c.counts[k] != 1 {
				t.Errorf("%s: %s dispatched %d times in the step, want once", c.name, k, c.counts[k])
			}
		}
		if n := c.counts["embed_"+b.mats[&w.Embed].format+"_f32"]; n != 0 {
			t.Errorf("%s: %d one-sequence gathers beside the step's gather", c.name, n)
		}
	}
	if four.Dispatches != one.Dispatches {
		t.Errorf("a step of 4 sequences records %d dispatches, a step of 1 %d: some kernel still runs per sequence",
			four.Dispatches, one.Dispatches)
	}
	ratio := float64(four.StepBytes()) / float64(one.StepBytes())
	t.Logf("bytes per step, 4 sequences against 1: %.3f×", ratio)
	if four.Sequences != 4 || ratio >= 1.6 {
		t.Errorf("a step of %d sequences moves %.3f× the bytes of a step of one; want 4 sequences under 1.6×", four.Sequences, ratio)
	}
	// Every weight shared by the rows is read once: beyond the minimum, a
	// step of four may add only what a step of one adds per sequence.
	if excess4, excess1 := four.StepBytes()-four.MinimumBytes, one.StepBytes()-one.MinimumBytes; excess4 > 4*excess1+1<<20 {
		t.Errorf("4 sequences plan %.1f MiB over their minimum, 1 sequence %.1f MiB: a weight is read more than once per step",
			mib(excess4), mib(excess1))
	}
}

// kernelCounter is the emu device counting the dispatches of each kernel
// by pipeline name since the last reset.
type kernelCounter struct {
	device.Device
	mu sync.Mutex
	n  map[string]int
}

func (d *kernelCounter) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n = map[string]int{}
}

func (d *kernelCounter) counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.n)
}

func (d *kernelCounter) NewCommandBuffer() (device.CommandBuffer, error) {
	cb, err := d.Device.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	return &countingBuffer{CommandBuffer: cb, d: d}, nil
}

type countingBuffer struct {
	device.CommandBuffer
	d *kernelCounter
}

func (c *countingBuffer) Dispatch(ds device.Dispatch) {
	c.d.mu.Lock()
	if c.d.n == nil {
		c.d.n = map[string]int{}
	}
	c.d.n[ds.Pipeline.Name()]++
	c.d.mu.Unlock()
	c.CommandBuffer.Dispatch(ds)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// syntheticCheckpoint returns the benchmark's synthetic checkpoint (full
// width, 4 layers, MLX layout, seed 1) in the folder `suzuran bench
// --synthetic` keeps it in (the user cache's suzuran/synthetic, named as
// engine/bench names it), writing it first when absent: it takes half a
// minute to write, two under the race detector. A new one is written beside
// the final folder and renamed into place, so an interrupted write leaves
// nothing a later run would take for a checkpoint.
func syntheticCheckpoint(t *testing.T) string {
	t.Helper()
	opt := synth.Options{Config: synth.FullSizeConfig(), Layers: 4, Seed: 1}
	base, err := os.UserCacheDir()
	if err != nil {
		base = t.TempDir()
	}
	dir := filepath.Join(base, "suzuran", "synthetic", fmt.Sprintf("%s-%dlayers-%s", synth.CacheKey(opt), opt.Layers, opt.Layout))
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".writing-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	if _, err := synth.Write(filepath.Join(tmp, "checkpoint"), opt); err != nil {
		t.Fatal(err)
	}
	t.Logf("synthetic checkpoint written in %v", time.Since(start).Round(time.Millisecond))
	if err := os.Rename(filepath.Join(tmp, "checkpoint"), dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "config.json")); statErr != nil {
			t.Fatal(err)
		}
		// Another run put it there first.
	}
	return dir
}
