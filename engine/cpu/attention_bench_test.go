package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/synth"
)

// BenchmarkAttentionCore measures attention over the cache alone (no
// projections, norms or rotary): a 512-token prefill chunk whose last
// token sits at position ctx−1, on the full model's heads (16 of 256 on 2
// kv heads) and the demo model's (8 of 64 on 2), on every thread. It
// reports the achieved GFLOP/s (4·D operations per score: q·k and p·v)
// and, measured in the same run just before, the peak of the fused
// multiply-add those products use on as many threads (fmaPeak).
func BenchmarkAttentionCore(b *testing.B) {
	for _, shape := range []struct {
		name     string
		h, kv, d int
	}{{"full", 16, 2, 256}, {"demo", 8, 2, 64}} {
		for _, ctx := range []int{2048, 8192, 32768} {
			b.Run(fmt.Sprintf("%s/ctx%d", shape.name, ctx), func(b *testing.B) {
				benchAttentionCore(b, shape.h, shape.kv, shape.d, ctx)
			})
		}
	}
}

func benchAttentionCore(b *testing.B, H, KV, D, ctx int) {
	const chunk = 512
	cfg, err := checkpoint.ParseConfig(synth.FullSizeConfig(), "full-size config")
	if err != nil {
		b.Fatal(err)
	}
	cfg.NumLayers, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim = 1, H, KV, D
	kern, err := kernelsFor(ISAAuto)
	if err != nil {
		b.Fatal(err)
	}
	be := &Backend{cfg: *cfg, w: &model.Weights{Config: *cfg, Layers: make([]model.Layer, 1), Embed: model.Matrix{Out: 1000}},
		pool: pool{threads: runtime.GOMAXPROCS(0)}, kern: kern, precision: PrecisionFast}
	s, err := be.NewSequence(ctx)
	if err != nil {
		b.Fatal(err)
	}
	seq := s.(*sequence)
	rng := rand.New(rand.NewPCG(5, 6))
	seq.layers[0].k = randomVector(rng, ctx*KV*D)
	seq.layers[0].v = randomVector(rng, ctx*KV*D)
	seq.tokens = make([]int, ctx-chunk)
	qg := randomVector(rng, chunk*H*2*D)
	o := make([]float32, chunk*H*D)
	flops := 0.0
	for t := range chunk {
		flops += float64(ctx-chunk+t+1) * float64(4*D*H)
	}
	peak, cpuPeak := measurePeak(be.pool.threads)
	var wall, cpu time.Duration
	b.ResetTimer()
	for range b.N {
		p, err := be.begin([]model.Segment{{Seq: seq, In: model.Input{IDs: make([]int, chunk)}}})
		if err != nil {
			b.Fatal(err)
		}
		start, cpu0 := time.Now(), processCPU()
		p.attendCache(0, qg, o)
		wall += time.Since(start)
		cpu += processCPU() - cpu0
		seq.busy = false
	}
	n := float64(b.N)
	b.ReportMetric(flops*n/wall.Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(flops*n/cpu.Seconds()/1e9*float64(be.pool.threads), "cpu-GFLOP/s")
	b.ReportMetric(peak, "peak-GFLOP/s")
	b.ReportMetric(cpuPeak, "cpu-peak-GFLOP/s")
	b.ReportMetric(wall.Seconds()*1e6/n/chunk, "µs/token")
}

// measurePeak is fmaPeak's GFLOP/s on threads goroutines at once, by the
// wall clock and by the process's CPU time (times threads: the rate were
// every thread on a core of its own), 0 where the architecture has none.
func measurePeak(threads int) (wall, cpu float64) {
	if fmaPeak == nil {
		return 0, 0
	}
	const iters = 20 << 20
	fmaPeak(iters / 8) // warm the units up
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), processCPU()
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmaPeak(iters)
		}()
	}
	wg.Wait()
	flops := float64(threads) * iters * fmaPeakFlops
	return flops / time.Since(start).Seconds() / 1e9, flops / (processCPU() - cpu0).Seconds() / 1e9 * float64(threads)
}
