package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/model"
)

// q8Cases are the matrix shapes of the int8 tests: every layout the
// kernels take (4-bit in groups of 32, 64 and 128, 8-bit in groups of 32,
// 64 and 128), row counts that are not multiples of the row block or the
// thread split, and matrices the int8 kernels do not take (4-bit in groups
// of 16; 4-bit in groups of 32 with a width that is not a multiple of 64,
// which would leave half a 32-byte load; BF16), which the fast path runs
// with the exact loops.
var q8Cases = []struct {
	dtype       model.DType
	bits, group int
	out, in     int
}{
	{model.Affine, 4, 64, 37, 192},
	{model.Affine, 4, 32, 13, 128},
	{model.Affine, 4, 32, 200, 192},
	{model.Affine, 4, 32, 7, 96},
	{model.Affine, 4, 128, 29, 256},
	{model.Affine, 8, 64, 37, 192},
	{model.Affine, 8, 32, 6, 160},
	{model.Affine, 8, 128, 11, 384},
	{model.Affine, 4, 64, 130, 2048},
	{model.Affine, 4, 16, 9, 48},
	{model.BF16, 0, 0, 21, 131},
}

// q8Rows are token counts around the kernels' blocks (64 tokens) and the
// exact path's switch to its GEMM (4 and 12 rows).
var q8Rows = []int{1, 2, 3, 4, 5, 9, 12, 17, 33, 70}

// fastBackends is one backend per quantized-activation precision (fast:
// int16, int8) and instruction set this machine runs, on three threads so
// that the row split is uneven.
func fastBackends(t *testing.T) []*Backend {
	var out []*Backend
	for _, p := range []Precision{PrecisionFast, PrecisionInt8} {
		for _, isa := range ISAs() {
			k, err := kernelsFor(isa)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, &Backend{pool: pool{threads: 3}, kern: k, precision: p})
		}
	}
	return out
}

// levels is the largest quantized activation of the backend's precision.
func (b *Backend) levels() float64 {
	if b.precision == PrecisionInt8 {
		return 127
	}
	return 32767
}

func (b *Backend) testName() string { return string(b.precision) + "/" + string(b.kern.isa) }

// TestQ8Products checks the fast path against a float64 product of the
// exact dequantized weights, on each instruction set. The int8 rounding of
// x moves each element by at most half its group's step d = max|x|/127, so
// a group's product moves by at most ½·d·Σ|w|; the bound adds those over
// the groups, plus 1e-5 of Σ|w·x| for the f32 accumulation (as in
// TestMatMul). A wrong nibble order, lane scale or bias lane is off by a
// sizeable part of Σ|w·x|, far above it. Matrices the int8 kernels do not
// take must match the exact loops' tolerance, 1e-5 of Σ|w·x|.
func TestQ8Products(t *testing.T) {
	backends := fastBackends(t)
	worst := make([]float64, len(backends))
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range q8Cases {
		tm := newTestMatrix(rng, c.dtype, c.out, c.in, c.bits, c.group)
		if err := checkMatrix(&tm.m); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%v%d-g%d-%dx%d", c.dtype, c.bits, c.group, c.out, c.in)
		for _, rows := range q8Rows {
			// The float64 reference, its scale Σ|w·x| and the rounding
			// bound of each precision, once for every backend.
			x := randomVector(rng, rows*c.in)
			want, mag := make([]float64, rows*c.out), make([]float64, rows*c.out)
			bound16, bound8 := make([]float64, rows*c.out), make([]float64, rows*c.out)
			for r := range rows {
				xr := x[r*c.in : (r+1)*c.in]
				for o := range c.out {
					for i, w := range tm.ref[o] {
						want[r*c.out+o] += w * float64(xr[i])
						mag[r*c.out+o] += math.Abs(w * float64(xr[i]))
					}
					if c.dtype == model.Affine {
						bound16[r*c.out+o] = quantBound(&tm, o, xr, 32767)
						bound8[r*c.out+o] = quantBound(&tm, o, xr, 127)
					}
				}
			}
			for bi, b := range backends {
				y := make([]float32, rows*c.out)
				b.matMul(y, x, rows, &tm.m)
				_, intPath := newQ8Layout(&tm.m, b.precision == PrecisionFast)
				for i := range y {
					tol := 1e-5 * mag[i]
					switch {
					case intPath && b.precision == PrecisionFast:
						tol += bound16[i]
					case intPath:
						tol += bound8[i]
					}
					if e := math.Abs(float64(y[i]) - want[i]); e > tol || math.IsNaN(e) {
						t.Fatalf("%s %s rows %d: y[%d, %d] = %v, want %v ± %.3g",
							b.testName(), name, rows, i/c.out, i%c.out, y[i], want[i], tol)
					}
					worst[bi] = max(worst[bi], math.Abs(float64(y[i])-want[i])/mag[i])
				}
			}
		}
	}
	for bi, b := range backends {
		t.Logf("%s: worst error %.2e of Σ|w·x|", b.testName(), worst[bi])
	}
}

// quantBound is ½·Σ_g d_g·Σ_{i∈g} |w_i| for row o of an affine test matrix
// against x: the fast path computes the product of the weights with x
// rounded to steps of d_g = max|x|/levels per group, each element moved by
// at most half a step.
func quantBound(tm *testMatrix, o int, x []float32, levels float64) float64 {
	gs := tm.m.GroupSize
	var bound float64
	for g := range tm.m.In / gs {
		var amax, wsum float64
		for i := g * gs; i < (g+1)*gs; i++ {
			amax = max(amax, math.Abs(float64(x[i])))
			wsum += math.Abs(tm.ref[o][i])
		}
		bound += 0.5 * amax / levels * wsum
	}
	// d itself is rounded to f32: a relative 1e-7, covered by 1.001.
	return bound * 1.001
}

// TestQ8BatchInvariance checks the invariant continuous batching relies
// on: a token row's output is bit for bit the same computed alone, in any
// batch, through matMul or matVecs beside other products of the same
// input, and on any number of threads.
func TestQ8BatchInvariance(t *testing.T) {
	for _, b := range fastBackends(t) {
		t.Run(b.testName(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(23, 24))
			for _, c := range q8Cases {
				tm := newTestMatrix(rng, c.dtype, c.out, c.in, c.bits, c.group)
				other := newTestMatrix(rng, c.dtype, 5, c.in, c.bits, c.group)
				const rows = 70
				x := randomVector(rng, rows*c.in)
				all := make([]float32, rows*c.out)
				b.matMul(all, x, rows, &tm.m)
				name := fmt.Sprintf("%v%d-g%d-%dx%d", c.dtype, c.bits, c.group, c.out, c.in)
				one := &Backend{pool: pool{threads: 1}, kern: b.kern, precision: b.precision}
				for _, batch := range []struct{ first, n int }{{0, 1}, {5, 1}, {69, 1}, {3, 2}, {10, 5}, {1, 13}, {60, 10}} {
					xs := x[batch.first*c.in : (batch.first+batch.n)*c.in]
					y := make([]float32, batch.n*c.out)
					y2 := make([]float32, batch.n*other.m.Out)
					one.matVecs([]vecJob{{y: y2, x: xs, rows: batch.n, w: &other.m}, {y: y, x: xs, rows: batch.n, w: &tm.m}})
					for r := range batch.n {
						for o := range c.out {
							got, want := y[r*c.out+o], all[(batch.first+r)*c.out+o]
							if math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("%s: token %d row %d in a batch of %d gives %v, in the batch of %d %v",
									name, batch.first+r, o, batch.n, got, rows, want)
							}
						}
					}
				}
			}
		})
	}
}

// TestQ8LevelsAgree checks that the SIMD levels agree bit for bit (they
// share the integer lanes and the float chain) and that the Go loops agree
// with them to within the rounding of the products they do not fuse: 1e-6
// of Σ|w·x|.
func TestQ8LevelsAgree(t *testing.T) {
	all := fastBackends(t)
	n := len(all) / 2
	for _, backends := range [][]*Backend{all[:n], all[n:]} {
		t.Run(string(backends[0].precision), func(t *testing.T) { levelsAgree(t, backends) })
	}
}

func levelsAgree(t *testing.T, backends []*Backend) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, c := range q8Cases {
		tm := newTestMatrix(rng, c.dtype, c.out, c.in, c.bits, c.group)
		const rows = 9
		x := randomVector(rng, rows*c.in)
		var first []float32
		for _, b := range backends {
			y := make([]float32, rows*c.out)
			b.matMul(y, x, rows, &tm.m)
			if first == nil {
				first = y
				continue
			}
			for i := range y {
				r, o := i/c.out, i%c.out
				if b.kern.isa != ISAGeneric {
					if math.Float32bits(y[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%v%d-g%d: %s gives %v for [%d, %d], %s %v", c.dtype, c.bits, c.group,
							b.kern.isa, y[i], r, o, backends[0].kern.isa, first[i])
					}
					continue
				}
				var mag float64
				for k, w := range tm.ref[o] {
					mag += math.Abs(w * float64(x[r*c.in+k]))
				}
				if d := math.Abs(float64(y[i]) - float64(first[i])); d > 1e-6*mag {
					t.Fatalf("%v%d-g%d: the Go loops give %v for [%d, %d], %s %v", c.dtype, c.bits, c.group,
						y[i], r, o, backends[0].kern.isa, first[i])
				}
			}
		}
	}
}

// TestKernelsFor checks that a level the machine lacks is refused with the
// levels it has, and that every listed level can be chosen.
func TestKernelsFor(t *testing.T) {
	for _, isa := range ISAs() {
		if k, err := kernelsFor(isa); err != nil || k.isa != isa {
			t.Errorf("%s: %v, %v", isa, k.isa, err)
		}
	}
	if k, err := kernelsFor("GENERIC"); err != nil || k.isa != ISAGeneric {
		t.Errorf("GENERIC: %v, %v", k.isa, err)
	}
	if _, err := kernelsFor("sse9"); err == nil {
		t.Error("an unknown instruction set was accepted")
	}
	if _, err := ParsePrecision("half"); err == nil {
		t.Error("an unknown precision was accepted")
	}
	if p, err := ParsePrecision(""); err != nil || p != PrecisionFast {
		t.Errorf("default precision: %v, %v", p, err)
	}
}

// BenchmarkProducts measures the affine products of each precision on a
// full-size DeltaNet input projection (4-bit, [8192, 2048]) on one
// thread, for a decode step, a small batch and a prefill chunk, in
// multiply-adds per second of wall time and, on Linux, of the thread's CPU
// time (steadier on a shared machine).
func BenchmarkProducts(b *testing.B) {
	benchProducts(b, 4, []Precision{PrecisionExact, PrecisionFast, PrecisionInt8})
}

// BenchmarkProducts8 is BenchmarkProducts on 8-bit weights (group 64, as
// the router and the shared expert's gate) with int16 activations.
func BenchmarkProducts8(b *testing.B) { benchProducts(b, 8, []Precision{PrecisionFast}) }

func benchProducts(b *testing.B, bits int, precisions []Precision) {
	rng := rand.New(rand.NewPCG(5, 6))
	tm := newTestMatrix(rng, model.Affine, 8192, 2048, bits, 64)
	for _, p := range precisions {
		for _, level := range benchLevels() {
			be := &Backend{pool: pool{threads: 1}, kern: level.k, precision: p}
			if p == PrecisionExact {
				be.precision = ""
			}
			for _, rows := range []int{1, 2, 4, 8, 512} {
				b.Run(fmt.Sprintf("%s/%s/rows%d", p, level.name, rows), func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					x := randomVector(rng, rows*2048)
					y := make([]float32, rows*8192)
					cpu0, ok := threadCPUTime()
					b.ResetTimer()
					for range b.N {
						be.matMul(y, x, rows, &tm.m)
					}
					macs := float64(b.N) * float64(rows) * 8192 * 2048
					b.ReportMetric(macs/b.Elapsed().Seconds()/1e9, "GMAC/s")
					if cpu1, ok1 := threadCPUTime(); ok && ok1 && cpu1 > cpu0 {
						b.ReportMetric(macs/(cpu1-cpu0).Seconds()/1e9, "GMAC/cpu-s")
					}
				})
			}
		}
	}
}

// benchLevels is each instruction set this machine runs, plus, where a
// level has multi-row kernels, the same level without them ("-1row": one
// weight row per call, 256-bit registers), to measure what they give.
func benchLevels() []struct {
	name string
	k    kernelSet
} {
	var out []struct {
		name string
		k    kernelSet
	}
	for _, isa := range ISAs() {
		k, _ := kernelsFor(isa)
		out = append(out, struct {
			name string
			k    kernelSet
		}{string(isa), k})
		if k.q8.w4Rows[0] != nil {
			k.q8.w4Rows, k.q8.w8Rows = [3]func(*q8Tile){}, [3]func(*q8Tile){}
			out = append(out, struct {
				name string
				k    kernelSet
			}{string(isa) + "-1row", k})
		}
	}
	return out
}

// TestQ8QuantizeLevels checks that each level's rounding of the
// activations (assembly where it has it) writes the Go loop's records
// byte for byte, on every layout of q8Cases with int16 and int8
// activations, for random rows, a row with an all-zero group, and rows
// whose scaled values fall on ties (x·inv = k + ½, which must round to
// even).
func TestQ8QuantizeLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, c := range q8Cases {
		if c.dtype != model.Affine {
			continue
		}
		tm := newTestMatrix(rng, c.dtype, c.out, c.in, c.bits, c.group)
		for _, wide := range []bool{true, false} {
			l, ok := newQ8Layout(&tm.m, wide)
			if !ok {
				continue
			}
			rows := [][]float32{randomVector(rng, c.in), randomVector(rng, c.in), make([]float32, c.in)}
			zeroGroup := randomVector(rng, c.in)
			clear(zeroGroup[c.group : 2*c.group])
			ties := make([]float32, c.in)
			for i := range ties {
				// max 2 in every group: inv = levels/2, and (2j+1)/levels
				// times inv is j + ½ before rounding.
				ties[i] = float32(2*(i%7)+1) / 32767
				if i%c.group == 0 {
					ties[i] = -2
				}
			}
			rows = append(rows, zeroGroup, ties)
			for _, isa := range ISAs() {
				k, _ := kernelsFor(isa)
				for r, x := range rows {
					want := make([]byte, l.recordBytes)
					got := make([]byte, l.recordBytes)
					l.quantize(want, x, nil)
					l.quantize(got, x, &k.q8)
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%s %d-bit g%d wide %v row %d: byte %d is %#x, the Go loop's %#x",
								isa, c.bits, c.group, wide, r, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestQ8PairRows checks the two-row kernels against the four-token
// multi-row kernels bit for bit (the same lanes and float chain per row and
// token, so no tolerance): every layout they take (4-bit in groups of 64
// and 128, 8-bit in groups of 32, 64 and 128: one to four chunks a unit),
// blocks of odd and even row counts starting at odd rows (the last row of
// an odd block goes through the four-token kernel), token counts that
// leave one to three tokens over, and rows with an infinite or NaN bias,
// where the two-row kernels hand the rows back to the four-token kernel
// (their bias lanes past the first are +0 where the others hold b·0,
// which differs only when b is not finite).
func TestQ8PairRows(t *testing.T) {
	k, err := kernelsFor(ISAAuto)
	if err != nil {
		t.Fatal(err)
	}
	if k.q8.w4Pair == nil {
		t.Skipf("%s has no two-row kernels", k.isa)
	}
	without := k.q8
	without.w4Pair, without.w8Pair = nil, nil
	rng := rand.New(rand.NewPCG(29, 30))
	cases := []struct{ bits, group, out, in int }{
		{4, 64, 37, 192}, {4, 128, 19, 256}, {8, 32, 21, 160}, {8, 64, 9, 192}, {8, 128, 11, 384}, {4, 64, 130, 2048},
	}
	for _, c := range cases {
		for _, bad := range []uint16{0, 0x7F80, 0xFF80, 0x7FC0} { // none, +Inf, -Inf, NaN
			tm := newTestMatrix(rng, model.Affine, c.out, c.in, c.bits, c.group)
			if bad != 0 {
				o, g := c.out/2, c.in/c.group-1
				binary.LittleEndian.PutUint16(tm.m.Biases[2*(o*(c.in/c.group)+g):], bad)
			}
			l, ok := newQ8Layout(&tm.m, true)
			if !ok || k.q8.pair(&l) == nil {
				t.Fatalf("%d-bit g%d: no two-row kernel", c.bits, c.group)
			}
			for _, rows := range []int{4, 5, 7, 8, 13} {
				x := randomVector(rng, rows*c.in)
				b := &Backend{pool: pool{threads: 1}, kern: k, precision: PrecisionFast}
				p := b.prepareQ8(l, x, rows, c.in)
				for _, span := range [][2]int{{0, c.out}, {1, c.out}, {3, c.out - 1}, {c.out - 1, c.out}, {2, 4}} {
					got, want := make([]float32, rows*c.out), make([]float32, rows*c.out)
					k.q8.q8Rows(got, rows, &tm.m, p, span[0], span[1])
					without.q8Rows(want, rows, &tm.m, p, span[0], span[1])
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%d-bit g%d [%d, %d], bias %#x, %d tokens, rows [%d, %d): y[%d, %d] = %v (%#x), the four-token kernel's %v (%#x)",
								c.bits, c.group, c.out, c.in, bad, rows, span[0], span[1], i/c.out, i%c.out,
								got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
				p.release()
			}
		}
	}
}

// BenchmarkPairBlock times the two-row kernels against the four-token
// multi-row kernels on one block of the fast path's prefill products: 128
// rows of a 2048-wide matrix (4-bit and 8-bit, groups of 64) against four
// prepared token rows, L2-resident as in a prefill chunk, one thread. It
// alternates the two every iteration and reports each one's fastest call
// (µs) and the ratio of those: the fastest of many calls is what a call
// costs without the interruptions of a shared machine.
func BenchmarkPairBlock(b *testing.B) {
	k, err := kernelsFor(ISAAuto)
	if err != nil {
		b.Fatal(err)
	}
	if k.q8.w4Pair == nil {
		b.Skipf("%s has no two-row kernels", k.isa)
	}
	without := k.q8
	without.w4Pair, without.w8Pair = nil, nil
	for _, bits := range []int{4, 8} {
		b.Run(fmt.Sprintf("%dbit", bits), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			rng := rand.New(rand.NewPCG(7, 8))
			tm := newTestMatrix(rng, model.Affine, 128, 2048, bits, 64)
			l, _ := newQ8Layout(&tm.m, true)
			be := &Backend{pool: pool{threads: 1}, kern: k, precision: PrecisionFast}
			p := be.prepareQ8(l, randomVector(rng, 4*2048), 4, 2048)
			y := make([]float32, 4*128)
			best := [2]time.Duration{time.Hour, time.Hour}
			for range b.N {
				for i, kk := range []*q8Kernels{&without, &k.q8} {
					t0 := time.Now()
					kk.q8Rows(y, 4, &tm.m, p, 0, 128)
					best[i] = min(best[i], time.Since(t0))
				}
			}
			b.ReportMetric(float64(best[0].Nanoseconds())/1e3, "µs-four-token")
			b.ReportMetric(float64(best[1].Nanoseconds())/1e3, "µs-two-row")
			b.ReportMetric(best[0].Seconds()/best[1].Seconds(), "speedup")
		})
	}
}
