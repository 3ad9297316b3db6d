package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// convCase is a causal conv over rows tokens of channels channels with k
// taps, random inputs, state and taps.
func convCase(rng *rand.Rand, channels, rows, k int, row func(out, rows []float32, stride int, taps []float32, k int)) *causalConv {
	taps := make([][]float32, channels)
	for ch := range taps {
		taps[ch] = randomVector(rng, k)
	}
	c := &causalConv{taps: taps, state: randomVector(rng, (k-1)*channels), channels: channels,
		in: randomVector(rng, rows*channels), out: make([]float32, rows*channels), act: &exactActivations, row: row}
	c.rows = append(append([]float32(nil), c.state...), c.in...)
	return c
}

// TestConvRows checks the conv's row kernels against the sum taken
// channel by channel (s = 0, then s += tap·x tap by tap, the
// definition's order), bit for bit: every kernel adds the same rounded
// products in the same order. The pieces' widths leave every tail of the
// assembly's eight lanes.
func TestConvRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	kernels := map[string]func(out, rows []float32, stride int, taps []float32, k int){"go": convRowGo}
	for _, isa := range ISAs() {
		kernels[string(isa)] = convRowFor(isa)
	}
	for name, row := range kernels {
		for _, k := range []int{1, 2, 4} {
			const channels, rows = 75, 9
			c := convCase(rng, channels, rows, k, row)
			for lo := 0; lo < channels; {
				hi := min(lo+1+rng.IntN(30), channels)
				c.channelsSilu(lo, hi)
				lo = hi
			}
			for tok := range rows {
				for ch := range channels {
					var s float32
					for j, tap := range c.taps[ch] {
						s += tap * c.rows[(tok+j)*channels+ch]
					}
					want := silu(s)
					if got := c.out[tok*channels+ch]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s, k=%d: token %d channel %d: %g, want %g", name, k, tok, ch, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkConv runs a full-size DeltaNet conv (8192 channels, 4 taps)
// over 256 tokens on one thread, piece by piece as the pass does, with
// each instruction set's row kernel and the fast path's silu.
func BenchmarkConv(b *testing.B) {
	const channels, rows, k = 8192, 256, 4
	for _, isa := range append(ISAs(), "") {
		name := string(isa)
		row := convRowFor(isa)
		if isa == "" {
			name, row = "go", convRowGo
		}
		b.Run(name, func(b *testing.B) {
			c := convCase(rand.New(rand.NewPCG(1, 2)), channels, rows, k, row)
			c.act = fastActivations(isa)
			for range b.N {
				for lo := 0; lo < channels; lo += convChannels {
					c.channelsSilu(lo, lo+convChannels)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*channels), "ns/output")
		})
	}
	// The conv as it was, channel by channel with math.Exp's silu: what
	// the row kernels replace.
	b.Run("columns", func(b *testing.B) {
		c := convCase(rand.New(rand.NewPCG(1, 2)), channels, rows, k, nil)
		for range b.N {
			for ch := range channels {
				for tok := range rows {
					var s float32
					for j, tap := range c.taps[ch] {
						s += tap * c.rows[(tok+j)*channels+ch]
					}
					c.out[tok*channels+ch] = silu(s)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*channels), "ns/output")
	})
}

// TestScaleAdd checks each instruction set's y += a·x against the Go loop
// bit for bit, over lengths that leave every tail.
func TestScaleAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, isa := range ISAs() {
		add := scaleAddFor(isa)
		for n := range 41 {
			x, y := randomVector(rng, n), randomVector(rng, n)
			a := float32(rng.NormFloat64())
			want := append([]float32(nil), y...)
			scaleAddGo(want, x, a)
			add(y, x, a)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s n=%d: element %d: %g, the Go loop gives %g", isa, n, i, y[i], want[i])
				}
			}
		}
	}
}
