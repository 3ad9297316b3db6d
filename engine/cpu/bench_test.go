package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/synth"
)

// blockTimes wraps a CPU pass and adds up the wall time of each kind of
// block; the CPU runs a block when it is called, so this is its cost.
type blockTimes struct {
	model.Pass
	deltaNet, attention, moe, head, total time.Duration
	// deltaNetCPU and attentionCPU are the process's CPU time inside the
	// DeltaNet and attention blocks (every thread's, the pool's included):
	// on a shared machine it moves less than wall time with the load of
	// others.
	deltaNetCPU, attentionCPU time.Duration
	// moeCPU is the same for the MoE blocks (every layer's).
	moeCPU time.Duration
}

func (b *blockTimes) DeltaNet(layer int, w *model.DeltaNet, x model.Activation) model.Activation {
	defer b.since(&b.deltaNet, time.Now())
	defer b.cpuSince(&b.deltaNetCPU, processCPU())
	return b.Pass.DeltaNet(layer, w, x)
}

func (b *blockTimes) Attention(layer int, w *model.Attention, x model.Activation) model.Activation {
	defer b.since(&b.attention, time.Now())
	defer b.cpuSince(&b.attentionCPU, processCPU())
	return b.Pass.Attention(layer, w, x)
}

func (b *blockTimes) MoE(layer int, w *model.MoE, x model.Activation) model.Activation {
	defer b.since(&b.moe, time.Now())
	defer b.cpuSince(&b.moeCPU, processCPU())
	return b.Pass.MoE(layer, w, x)
}

func (b *blockTimes) Head(x model.Activation, w *model.Matrix) model.Activation {
	defer b.since(&b.head, time.Now())
	return b.Pass.Head(x, w)
}

func (b *blockTimes) since(d *time.Duration, t time.Time) { *d += time.Since(t) }

func (b *blockTimes) cpuSince(d *time.Duration, t time.Duration) { *d += processCPU() - t }

// runTimed runs one pass through the timing wrapper.
func runTimed(tb testing.TB, be *Backend, w *model.Weights, seq model.Sequence, in model.Input, bt *blockTimes) model.Result {
	start := time.Now()
	segs := []model.Segment{{Seq: seq, In: in}}
	p, err := be.Begin(segs)
	if err != nil {
		tb.Fatal(err)
	}
	bt.Pass = p
	model.Forward(bt, w, segs)
	bt.Submit()
	res, err := bt.Wait()
	if err != nil {
		tb.Fatal(err)
	}
	bt.total += time.Since(start)
	return res[0]
}

// benchRun is what a pass benchmark measured: n passes of tokens each,
// and the pool's usage (threads threads) over them.
type benchRun struct {
	n, tokens int
	pools     poolUsage
	threads   int
}

// report turns block times over the run's passes into per-layer times and
// the projection to the full 40 layers (30 DeltaNet, 10 attention; every
// layer has an MoE).
func report(b *testing.B, bt *blockTimes, w *model.Weights, run benchRun) {
	n, tokens, pools, threads := run.n, run.tokens, run.pools, run.threads
	var dnLayers, attLayers int
	for _, l := range w.Layers {
		if l.DeltaNet != nil {
			dnLayers++
		} else {
			attLayers++
		}
	}
	per := func(d time.Duration, layers int) float64 { return d.Seconds() / float64(n*layers) }
	moe := per(bt.moe, dnLayers+attLayers)
	dn := per(bt.deltaNet, dnLayers) + moe
	att := per(bt.attention, attLayers) + moe
	head := per(bt.head, 1)
	other := per(bt.total-bt.deltaNet-bt.attention-bt.moe-bt.head, 1)
	full := 30*dn + 10*att + head + other
	b.ReportMetric(float64(n*tokens)/bt.total.Seconds(), "tok/s")
	b.ReportMetric(dn*1e3, "ms/deltanet-layer")
	b.ReportMetric(att*1e3, "ms/attention-layer")
	b.ReportMetric(moe*1e3, "ms/moe")
	b.ReportMetric(head*1e3, "ms/head")
	b.ReportMetric(per(bt.deltaNetCPU, dnLayers)*1e3, "cpu-ms/deltanet-block")
	b.ReportMetric(per(bt.attentionCPU, attLayers)*1e3, "cpu-ms/attention-block")
	b.ReportMetric(per(bt.moeCPU, dnLayers+attLayers)*1e3, "cpu-ms/moe")
	b.ReportMetric(full*1e3, "ms/pass-40-layers")
	b.ReportMetric(float64(tokens)/full, "tok/s-40-layers")
	// Where the threads' time went: the share of the wall time inside
	// parallel regions, and how busy the threads were inside them.
	if pools.Wall > 0 {
		b.ReportMetric(pools.Wall.Seconds()/bt.total.Seconds(), "parallel-fraction")
		b.ReportMetric(pools.Busy.Seconds()/(pools.Wall.Seconds()*float64(threads)), "thread-use-in-parallel")
		b.ReportMetric(float64(pools.Regions)/float64(n), "regions/pass")
	}
}

// since is the pool's usage since before.
func (u poolUsage) since(before poolUsage) poolUsage {
	return poolUsage{Regions: u.Regions - before.Regions, Wall: u.Wall - before.Wall, Busy: u.Busy - before.Busy}
}

// benchWeights is the synthetic benchmark checkpoint: full-size shapes from
// the mlx-community config, two layers (one DeltaNet, one attention),
// MLX 4-bit, written once by engine/synth and cached in the temp folder
// under its key (about 1.5 GB), then mapped like a real download.
// benchSetupWith loads it once and makes a backend with opt.
var benchWeights *model.Weights

func benchSetupWith(b *testing.B, opt Options) (*Backend, *model.Weights) {
	if benchWeights == nil {
		cfg := synth.FullSizeConfig()
		opt := synth.Options{Config: cfg, Layers: 2, Seed: 7, Layout: checkpoint.MLX}
		dir := filepath.Join(os.TempDir(), "suzuran-synth-"+synth.CacheKey(opt))
		if _, err := os.Stat(dir); err != nil {
			if _, err := synth.Write(dir, opt); err != nil {
				b.Fatal(err)
			}
		}
		m, err := checkpoint.Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		benchWeights = m.Weights // kept mapped for the whole test binary
	}
	be, err := New(benchWeights, opt)
	if err != nil {
		b.Fatal(err)
	}
	return be, benchWeights
}

func benchPrompt(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*7919 + 13) % 248000
	}
	return ids
}

// BenchmarkDecode measures one decode step (greedy, through the cache) after
// a 512-token prompt, on one full-size DeltaNet layer and one full-size
// attention layer, and projects the full model.
func BenchmarkDecode(b *testing.B) { benchDecode(b, Options{}) }

// BenchmarkDecodeExact and BenchmarkDecodeInt8 are BenchmarkDecode with the
// exact f32 products and with int8 activations.
func BenchmarkDecodeExact(b *testing.B) { benchDecode(b, Options{Precision: PrecisionExact}) }
func BenchmarkDecodeInt8(b *testing.B)  { benchDecode(b, Options{Precision: PrecisionInt8}) }

func benchDecode(b *testing.B, opt Options) {
	be, w := benchSetupWith(b, opt)
	seq, err := be.NewSequence(4096)
	if err != nil {
		b.Fatal(err)
	}
	greedy := &model.Sampling{}
	if _, err := model.Prefill(be, w, seq, benchPrompt(512), 0, model.Input{Sample: greedy}); err != nil {
		b.Fatal(err)
	}
	var bt blockTimes
	before := be.pool.usage()
	b.ResetTimer()
	for range b.N {
		runTimed(b, be, w, seq, model.Input{Sample: greedy}, &bt)
	}
	report(b, &bt, w, benchRun{b.N, 1, be.pool.usage().since(before), be.pool.threads})
}

// BenchmarkDecodeGoLoops is BenchmarkDecode with the assembly kernels off:
// what a machine without them (arm64, old x86) gets from the Go loops.
func BenchmarkDecodeGoLoops(b *testing.B) {
	benchDecode(b, Options{ISA: ISAGeneric})
}

// BenchmarkPrefill512 measures a 512-token prefill chunk (logits of the last
// row only) on the same two layers and projects the full model.
func BenchmarkPrefill512(b *testing.B) { benchPrefill512(b, Options{}) }

// BenchmarkPrefill512Exact and BenchmarkPrefill512Int8 are
// BenchmarkPrefill512 with the exact f32 products and with int8
// activations.
func BenchmarkPrefill512Exact(b *testing.B) { benchPrefill512(b, Options{Precision: PrecisionExact}) }
func BenchmarkPrefill512Int8(b *testing.B)  { benchPrefill512(b, Options{Precision: PrecisionInt8}) }

func benchPrefill512(b *testing.B, opt Options) {
	be, w := benchSetupWith(b, opt)
	prompt := benchPrompt(512)
	var bt blockTimes
	before := be.pool.usage()
	var gc0 runtime.MemStats
	runtime.ReadMemStats(&gc0)
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		seq, err := be.NewSequence(1024)
		if err != nil {
			b.Fatal(err)
		}
		runTimed(b, be, w, seq, model.Input{IDs: prompt, Logits: model.LogitsLast}, &bt)
	}
	cpu := processCPU() - cpu0
	var gc1 runtime.MemStats
	runtime.ReadMemStats(&gc1)
	report(b, &bt, w, benchRun{b.N, len(prompt), be.pool.usage().since(before), be.pool.threads})
	// The whole pass's process CPU (the garbage collector's included) and
	// the collections it started.
	b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(gc1.NumGC-gc0.NumGC)/float64(b.N), "gcs/op")
}

// fullSizeAttention builds one attention layer of the full model's shape
// with random 4-bit weights (no checkpoint needed) and a sequence holding
// context positions of random keys and values in its cache.
func fullSizeAttention(tb testing.TB, context int, precision Precision) (*Backend, *model.Attention, *sequence) {
	cfg, err := checkpoint.ParseConfig(synth.FullSizeConfig(), "full-size config")
	if err != nil {
		tb.Fatal(err)
	}
	cfg.NumLayers = 1
	rng := rand.New(rand.NewPCG(3, 4))
	H, KV, D, hidden := cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.HiddenSize
	att := &model.Attention{QNorm: make([]float32, D), KNorm: make([]float32, D)}
	for i := range D {
		att.QNorm[i], att.KNorm[i] = 1, 1
	}
	att.Q = newTestMatrix(rng, model.Affine, 2*H*D, hidden, 4, 64).m
	att.K = newTestMatrix(rng, model.Affine, KV*D, hidden, 4, 64).m
	att.V = newTestMatrix(rng, model.Affine, KV*D, hidden, 4, 64).m
	att.O = newTestMatrix(rng, model.Affine, hidden, H*D, 4, 64).m
	w := &model.Weights{Config: *cfg, Layers: []model.Layer{{Attention: att}}, Embed: model.Matrix{Out: 1000}}
	kern, err := kernelsFor(ISAAuto)
	if err != nil {
		tb.Fatal(err)
	}
	b := &Backend{cfg: *cfg, w: w, pool: pool{threads: runtime.GOMAXPROCS(0)}, kern: kern, precision: precision}
	s, err := b.NewSequence(context + 1024)
	if err != nil {
		tb.Fatal(err)
	}
	seq := s.(*sequence)
	st := &seq.layers[0]
	st.k = randomVector(rng, context*KV*D)
	st.v = randomVector(rng, context*KV*D)
	seq.tokens = make([]int, context)
	return b, att, seq
}

// BenchmarkAttentionDecode measures one decode step of a full-size attention
// block (projections, attention over the cache, gated output) at 16 and 512
// positions of context, with the exact and the fast (quantized
// activations) products; the cache is cut back after each step. The cold
// runs write a buffer larger than the last-level cache between steps, as a
// model's other layers do in a decode step, so that the weights and the
// cache come from memory; their times count the steps alone.
func BenchmarkAttentionDecode(b *testing.B) {
	for _, precision := range []Precision{PrecisionExact, PrecisionFast} {
		for _, context := range []int{16, 512} {
			b.Run(fmt.Sprintf("%s/context%d", precision, context), func(b *testing.B) { benchAttentionDecode(b, context, precision, false) })
		}
	}
	for _, context := range []int{512, 2048} {
		b.Run(fmt.Sprintf("fast/context%d/cold", context), func(b *testing.B) { benchAttentionDecode(b, context, PrecisionFast, true) })
	}
}

// coldBytes is more than the last-level cache of the machines the project
// runs on.
const coldBytes = 128 << 20

func benchAttentionDecode(b *testing.B, context int, precision Precision, cold bool) {
	be, att, seq := fullSizeAttention(b, context, precision)
	x := &tensor{rows: 1, width: be.cfg.HiddenSize, data: randomVector(rand.New(rand.NewPCG(1, 2)), be.cfg.HiddenSize)}
	kvw := be.kvWidth()
	var evict []byte
	if cold {
		evict = make([]byte, coldBytes)
	}
	var wall, cpu time.Duration
	b.ResetTimer()
	for i := range b.N {
		if cold {
			for j := 0; j < len(evict); j += 64 {
				evict[j] = byte(i)
			}
		}
		start, cpu0 := time.Now(), processCPU()
		p, err := be.begin([]model.Segment{{Seq: seq, In: model.Input{IDs: []int{1}}}})
		if err != nil {
			b.Fatal(err)
		}
		p.Attention(0, att, x)
		if p.err != nil {
			b.Fatal(p.err)
		}
		wall += time.Since(start)
		cpu += processCPU() - cpu0
		seq.busy = false
		st := &seq.layers[0]
		st.k, st.v = st.k[:context*kvw], st.v[:context*kvw]
	}
	b.ReportMetric(wall.Seconds()*1e3/float64(b.N), "ms/step")
	b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/step")
}

// processCPU is the CPU time of the process so far, user and system: on a
// shared machine it moves less than wall time with the load of others.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAttentionPrefill measures a full-size attention block over a
// 512-token prefill chunk from an empty cache (exact products).
func BenchmarkAttentionPrefill(b *testing.B) {
	const tokens = 512
	be, att, seq := fullSizeAttention(b, 0, PrecisionExact)
	x := &tensor{rows: tokens, width: be.cfg.HiddenSize, data: randomVector(rand.New(rand.NewPCG(1, 2)), tokens*be.cfg.HiddenSize)}
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		p, err := be.begin([]model.Segment{{Seq: seq, In: model.Input{IDs: make([]int, tokens)}}})
		if err != nil {
			b.Fatal(err)
		}
		p.Attention(0, att, x)
		if p.err != nil {
			b.Fatal(p.err)
		}
		seq.busy = false
		st := &seq.layers[0]
		st.k, st.v = st.k[:0], st.v[:0]
	}
	b.ReportMetric((processCPU()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
}

// BenchmarkDecodeBatch measures one batched decode step (model.RunBatch)
// of 1, 2 and 4 sequences, each after its own 64-token prompt, on the same
// two layers: CPU time per step from the process, and per sequence, which
// a batch lowers only where the sequences share work (the products whose
// weights every row uses, the head; each routed expert serves the rows
// chosen for it).
func BenchmarkDecodeBatch(b *testing.B) {
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("seqs%d", n), func(b *testing.B) {
			be, w := benchSetupWith(b, Options{})
			greedy := &model.Sampling{}
			segs := make([]model.Segment, n)
			for i := range segs {
				seq, err := be.NewSequence(1024)
				if err != nil {
					b.Fatal(err)
				}
				// Prompts that differ in every token, so that the
				// sequences' tokens, and with them their routed experts,
				// differ as in real traffic.
				prompt := benchPrompt(64)
				for j := range prompt {
					prompt[j] = (prompt[j] + 104729*(i+1)) % 248000
				}
				if _, err := model.Prefill(be, w, seq, prompt, 0, model.Input{Sample: greedy}); err != nil {
					b.Fatal(err)
				}
				segs[i] = model.Segment{Seq: seq, In: model.Input{Sample: greedy}}
			}
			cpu0 := processCPU()
			b.ResetTimer()
			for range b.N {
				if _, err := model.RunBatch(be, w, segs); err != nil {
					b.Fatal(err)
				}
			}
			cpu := processCPU() - cpu0
			b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/step")
			b.ReportMetric(cpu.Seconds()*1e3/float64(b.N*n), "cpu-ms/token")
		})
	}
}

// BenchmarkDecodeLayerProducts runs the products of one decode step of a
// full-size DeltaNet layer as the pass groups them: the mixer's (qkv, z,
// b, a in one call, then out) and the MoE's (router; the shared expert's
// gate, gate and up and every routed expert's gate and up in one call;
// then the downs), for 8 routed experts that change from step to step.
// "hot" runs them back to back, so a product's weights are in the caches
// from the step before (the mixer's, 19 MB, in L3; the experts' only as
// far as they repeat); "cold" reads a buffer larger than the caches before
// each step, untimed, as a decode step does when the rest of the model's
// weights (the head's 290 MB) pass between a layer's steps.
//
// The runs without a suffix are one thread: they report the multiply-adds
// per second of the thread's CPU time and the CPU milliseconds per step of
// each part. The "2threads" runs use a pool of two threads, as a decode
// step does on this project's 2-core machines, and report the wall time
// per step and the weight bytes read per second of it, to set against
// BenchmarkReadBandwidth.
func BenchmarkDecodeLayerProducts(b *testing.B) {
	be0, w := benchSetupWith(b, Options{})
	one := &Backend{pool: pool{threads: 1}, kern: be0.kern, precision: be0.precision, cfg: be0.cfg}
	two := &Backend{pool: pool{threads: 2}, kern: be0.kern, precision: be0.precision, cfg: be0.cfg}
	lp := newLayerProducts(be0, w)
	flush := make([]byte, 256<<20)
	for i := range flush {
		flush[i] = byte(i)
	}
	var sink byte
	// read reads flush through the caches, untimed, before a cold step.
	read := func(cold bool) {
		if cold {
			for j := 0; j < len(flush); j += 64 {
				sink += flush[j]
			}
		}
	}
	for _, part := range []struct {
		name string
		run  func(be *Backend, step int) productWork
	}{{"mixer", lp.mixer}, {"moe", lp.experts}} {
		for _, cold := range []bool{false, true} {
			name := part.name + "/hot"
			if cold {
				name = part.name + "/cold"
			}
			b.Run(name, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var cpu time.Duration
				var n productWork
				for i := range b.N {
					read(cold)
					c0, ok := threadCPUTime()
					n = n.add(part.run(one, i))
					c1, ok1 := threadCPUTime()
					if !ok || !ok1 {
						b.Skip("no thread CPU time on this system")
					}
					cpu += c1 - c0
				}
				b.ReportMetric(n.macs/cpu.Seconds()/1e9, "GMAC/cpu-s")
				b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/step")
			})
			b.Run(name+"/2threads", func(b *testing.B) {
				var wall, cpu time.Duration
				var n productWork
				for i := range b.N {
					read(cold)
					t0, c0 := time.Now(), processCPU()
					n = n.add(part.run(two, i))
					wall += time.Since(t0)
					cpu += processCPU() - c0
				}
				b.ReportMetric(wall.Seconds()*1e3/float64(b.N), "ms/step")
				b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/step")
				b.ReportMetric(n.bytes/wall.Seconds()/1e9, "GB/s")
			})
		}
	}
	_ = sink
}

// productWork is what a part of BenchmarkDecodeLayerProducts did:
// multiply-adds and weight bytes read.
type productWork struct{ macs, bytes float64 }

func (a productWork) add(b productWork) productWork {
	return productWork{a.macs + b.macs, a.bytes + b.bytes}
}

// countWork is the work of one row through each of ms.
func countWork(ms ...*model.Matrix) productWork {
	var n productWork
	for _, m := range ms {
		n.macs += float64(m.Out) * float64(m.In)
		n.bytes += float64(len(m.Data) + len(m.Scales) + len(m.Biases))
	}
	return n
}

// layerProducts holds the first DeltaNet layer's weights of the benchmark
// checkpoint and a random input row for BenchmarkDecodeLayerProducts.
type layerProducts struct {
	dn  *model.DeltaNet
	moe *model.MoE
	cfg model.Config
	x   []float32
	rng *rand.Rand
}

func newLayerProducts(be *Backend, w *model.Weights) *layerProducts {
	lp := &layerProducts{cfg: be.cfg, rng: rand.New(rand.NewPCG(3, 4))}
	for _, l := range w.Layers {
		if l.DeltaNet != nil {
			lp.dn, lp.moe = l.DeltaNet, &l.MoE
			break
		}
	}
	lp.x = lp.vec(be.cfg.HiddenSize)
	return lp
}

func (lp *layerProducts) vec(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lp.rng.NormFloat64())
	}
	return v
}

// mixer is the DeltaNet mixer's products of one decode step.
func (lp *layerProducts) mixer(be *Backend, _ int) productWork {
	dn, x := lp.dn, lp.x
	qkv, z := make([]float32, dn.QKV.Out), make([]float32, dn.Z.Out)
	bb, a := make([]float32, dn.B.Out), make([]float32, dn.A.Out)
	be.matVecs([]vecJob{{y: qkv, x: x, rows: 1, w: &dn.QKV}, {y: z, x: x, rows: 1, w: &dn.Z},
		{y: bb, x: x, rows: 1, w: &dn.B}, {y: a, x: x, rows: 1, w: &dn.A}})
	o := lp.vec(dn.Out.In)
	be.matVecs([]vecJob{{y: make([]float32, lp.cfg.HiddenSize), x: o, rows: 1, w: &dn.Out}})
	return countWork(&dn.QKV, &dn.Z, &dn.B, &dn.A, &dn.Out)
}

// experts is the MoE's products of decode step step, whose 8 routed
// experts change from step to step.
func (lp *layerProducts) experts(be *Backend, step int) productWork {
	moe, x, H := lp.moe, lp.x, lp.cfg.HiddenSize
	be.matVecs([]vecJob{{y: make([]float32, moe.Router.Out), x: x, rows: 1, w: &moe.Router}})
	n := countWork(&moe.Router, &moe.SharedExpert, &moe.SharedGate, &moe.SharedUp, &moe.SharedDown)
	jobs := []vecJob{{y: make([]float32, 1), x: x, rows: 1, w: &moe.SharedExpert},
		{y: make([]float32, moe.SharedGate.Out), x: x, rows: 1, w: &moe.SharedGate},
		{y: make([]float32, moe.SharedUp.Out), x: x, rows: 1, w: &moe.SharedUp}}
	var chosen []int
	for i := range lp.cfg.ExpertsPerToken {
		e := (step*61 + i*37) % lp.cfg.NumExperts
		chosen = append(chosen, e)
		jobs = append(jobs, vecJob{y: make([]float32, moe.Gate[e].Out), x: x, rows: 1, w: &moe.Gate[e]},
			vecJob{y: make([]float32, moe.Up[e].Out), x: x, rows: 1, w: &moe.Up[e]})
		n = n.add(countWork(&moe.Gate[e], &moe.Up[e], &moe.Down[e]))
	}
	be.matVecs(jobs)
	hidden := lp.vec(moe.SharedDown.In)
	jobs = []vecJob{{y: make([]float32, H), x: hidden, rows: 1, w: &moe.SharedDown}}
	for _, e := range chosen {
		jobs = append(jobs, vecJob{y: make([]float32, H), x: hidden[:moe.Down[e].In], rows: 1, w: &moe.Down[e]})
	}
	be.matVecs(jobs)
	return n
}

// BenchmarkReadBandwidth measures how fast one and two threads read a
// buffer larger than the caches (one word per 64-byte line, the hardware
// fetching the whole line): the ceiling of a decode step's products,
// which read every weight of a layer once from memory.
func BenchmarkReadBandwidth(b *testing.B) {
	buf := make([]uint64, 512<<20/8)
	for i := range buf {
		buf[i] = uint64(i)
	}
	read := func(part []uint64) uint64 {
		var s0, s1, s2, s3 uint64
		for i := 0; i+32 <= len(part); i += 32 {
			s0 += part[i]
			s1 += part[i+8]
			s2 += part[i+16]
			s3 += part[i+24]
		}
		return s0 + s1 + s2 + s3
	}
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads%d", threads), func(b *testing.B) {
			p := &pool{threads: threads}
			sums := make([]uint64, threads)
			part := len(buf) / threads
			var wall time.Duration
			for range b.N {
				t0 := time.Now()
				p.parallelEach(threads, func(lo, hi int) {
					for t := lo; t < hi; t++ {
						sums[t] += read(buf[t*part : (t+1)*part])
					}
				})
				wall += time.Since(t0)
			}
			b.ReportMetric(float64(len(buf)*8)*float64(b.N)/wall.Seconds()/1e9, "GB/s")
		})
	}
}
