package cpu

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDeltaScan measures one full-size value head (128×128 state)
// through a 512-token prefill chunk.
func BenchmarkDeltaScan(b *testing.B) {
	const dk, dv, tokens = 128, 128, 512
	rng := rand.New(rand.NewPCG(1, 2))
	channels := 2*dk + dv
	rows := randomVector(rng, tokens*channels)
	decay, beta := make([]float32, tokens), make([]float32, tokens)
	for i := range decay {
		decay[i], beta[i] = 0.9, 0.5
	}
	state := make([]float32, dk*dv)
	out := make([]float32, tokens*dv)
	k, err := kernelsFor(ISAAuto)
	if err != nil {
		b.Fatal(err)
	}
	scan := deltaScan{state: state, rows: rows, channels: channels, query: 0, key: dk, value: 2 * dk,
		keyDim: dk, valueDim: dv, out: out, outStride: dv, decay: decay, beta: beta, gateStride: 1, kern: &k.f32}
	cpu0 := processCPU()
	for range b.N {
		scan.run()
	}
	b.ReportMetric((processCPU()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
}
