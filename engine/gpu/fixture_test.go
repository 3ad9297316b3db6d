package gpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// The fixtures hold transformers' outputs for a float64 run of the same
// weights. With an f32 KV cache and f32 GEMM operands the GPU path is f32
// throughout and lands within about 1e-5 of the largest logit; 1e-3 leaves
// room for longer prompts while any real mistake (a wrong head mapping, a
// missing 1+w, a routing error) moves logits by 1e-2 or more of their
// scale. With half GEMM operands (the default) or the bf16 cache the
// issue's bound for reduced-precision operands, 2e-2, applies. Greedy ids
// must match exactly either way (the fixtures' smallest greedy gap is 2e-2
// of the logit scale or more).
const (
	fixtureTolerance = 1e-3
	bf16Tolerance    = 2e-2
)

func openModel(t testing.TB, dir string, opt Options) (*Backend, *model.Weights) {
	m, err := checkpoint.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := New(openTestDevice(t, 0), m.Weights, opt)
	if err != nil {
		t.Fatal(err)
	}
	return b, m.Weights
}

// TestFixtures runs each reference prompt through the GPU path as the engine
// does — prefill in chunks of 64 tokens, one command buffer each, then
// greedy decode with each step submitted before the host waits on the one
// before — and checks, against transformers' float64 outputs:
//   - the residual stream after every layer and the logits at every prompt
//     position (every chunk returns its rows);
//   - the greedy continuation (ids exactly) and the logits that chose it;
//   - the pipeline counters: one command buffer per chunk and per token, at
//     most one host wait per token, no readback inside a step, and planned
//     decode traffic within 1.15× of the minimum.
//
// It runs each checkpoint twice: with f32 GEMM operands (f32 throughout,
// fixtureTolerance) and with the default half operands (bf16Tolerance).
func TestFixtures(t *testing.T) {
	for _, ref := range fixtures.Models(t) {
		for _, ops := range operandTypes {
			t.Run(ref.Name+"/"+ops.String(), func(t *testing.T) {
				tol := fixtureTolerance
				if ops == HalfOperands {
					tol = bf16Tolerance
				}
				b, w := openModel(t, ref.Dir, Options{KVCacheF32: true, GEMMOperands: ops})
				runFixture(t, b, w, ref, tol)
			})
		}
	}
}

// TestFixtureBF16Cache runs the tiny model with the defaults, the bf16 KV
// cache and half GEMM operands: the rounding of cached keys and values moves
// logits by about 5e-4 of their scale, inside the 2e-2 the issue allows for
// bf16 operands.
func TestFixtureBF16Cache(t *testing.T) {
	ref := fixtures.Models(t)[1]
	b, w := openModel(t, ref.Dir, Options{})
	runFixture(t, b, w, ref, bf16Tolerance)
}

const prefillChunk = 64

func runFixture(t *testing.T, b *Backend, w *model.Weights, ref *fixtures.Reference, tol float64) {
	T := len(ref.Prompt)
	seq, err := b.NewSequence(T + len(ref.GenIDs))
	if err != nil {
		t.Fatal(err)
	}
	greedy := &model.Sampling{}
	H := ref.Size
	hidden := make([][]float32, len(w.Layers)+1)
	var logits []float32
	var res model.Result
	for start := 0; start < T; start += prefillChunk {
		end := min(start+prefillChunk, T)
		in := model.Input{IDs: ref.Prompt[start:end], Logits: model.LogitsAll, Hidden: true}
		if end == T {
			in.Sample = greedy
		}
		if res, err = model.Run(b, w, seq, in); err != nil {
			t.Fatal(err)
		}
		for l := range hidden {
			hidden[l] = append(hidden[l], res.Hidden[l]...)
		}
		logits = append(logits, res.Logits...)
	}
	for l := range hidden {
		want := ref.Hidden[l*T*H : (l+1)*T*H]
		e := fixtures.RelError(hidden[l], want)
		t.Logf("hidden %d: relative error %.2e", l, e)
		if e > tol || math.IsNaN(e) {
			t.Fatalf("residual stream after layer %d (0: embedding) drifts: relative error %.3g > %g", l, e, tol)
		}
	}
	e := fixtures.RelError(logits, ref.Logits)
	t.Logf("prompt logits [%d, %d]: relative error %.2e", T, ref.Vocab, e)
	if e > tol || math.IsNaN(e) {
		t.Fatalf("prompt logits: relative error %.3g > %g", e, tol)
	}

	// Pipelined greedy decode: submit step N+1, then wait on step N.
	ids := []int{res.Token}
	genLogits := append([]float32(nil), logits[(T-1)*ref.Vocab:]...)
	in := model.Input{Logits: model.LogitsLast, Sample: greedy}
	steps := len(ref.GenIDs) - 1
	prev, err := model.Start(b, w, seq, in)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < steps; i++ {
		var next model.Pass
		if i+1 < steps {
			if next, err = model.Start(b, w, seq, in); err != nil {
				t.Fatal(err)
			}
		}
		r, err := prev.Wait()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Token)
		genLogits = append(genLogits, r.Logits...)
		prev = next
	}
	if fmt.Sprint(ids) != fmt.Sprint(ref.GenIDs) {
		t.Fatalf("greedy continuation\n got %v\nwant %v", ids, ref.GenIDs)
	}
	e = fixtures.RelError(genLogits, ref.GenLogits)
	t.Logf("generated logits [%d, %d]: relative error %.2e", len(ids), ref.Vocab, e)
	if e > tol || math.IsNaN(e) {
		t.Fatalf("generated logits: relative error %.3g > %g", e, tol)
	}
	checkCounters(t, b.Stats(), int64(steps), int64((T+prefillChunk-1)/prefillChunk))
}

func checkCounters(t *testing.T, s Stats, steps, chunks int64) {
	t.Helper()
	t.Logf("\n%s", strings.Join(s.Lines(), "\n"))
	d, p := s.Decode, s.Prefill
	if d.Passes != steps {
		t.Fatalf("%d decode passes counted, ran %d", d.Passes, steps)
	}
	if d.CommandBuffers != d.Passes {
		t.Errorf("decode: %d command buffers for %d tokens, want one per token", d.CommandBuffers, d.Passes)
	}
	if d.HostWaits > d.Passes {
		t.Errorf("decode: %d host waits for %d tokens, want at most one per token", d.HostWaits, d.Passes)
	}
	if d.MidStepReadbacks != 0 || p.MidStepReadbacks != 0 {
		t.Errorf("mid-step readbacks: decode %d, prefill %d, want 0", d.MidStepReadbacks, p.MidStepReadbacks)
	}
	if p.Passes != chunks || p.CommandBuffers != p.Passes {
		t.Errorf("prefill: %d command buffers for %d chunks (want %d chunks, one buffer each)", p.CommandBuffers, p.Passes, chunks)
	}
	ratio := float64(d.ReadBytes+d.WriteBytes) / float64(d.MinimumBytes)
	if ratio > 1.15 {
		t.Errorf("decode plans %.3f× the minimum traffic, want at most 1.15×", ratio)
	}
}

// TestSampledDecode generates with sampling parameters on the GPU path and
// on the CPU backend (whose sample block is engine/sample on the host): the
// same seed must give the same tokens. The first set runs entirely on the
// device (penalties over the device-side history, top-k, top-p, the seeded
// draw) with steps pipelined; the second has top-k off, which the backend
// samples on the host after each step.
func TestSampledDecode(t *testing.T) {
	ref := fixtures.Models(t)[1]
	cases := []struct {
		name      string
		s         model.Sampling
		pipelined bool
	}{
		{"device", model.Sampling{Temperature: 0.8, TopK: 20, TopP: 0.9, RepetitionPenalty: 1.1,
			PresencePenalty: 0.5, FrequencyPenalty: 0.2, GeneratedFrom: len(ref.Prompt), Seed: 12345}, true},
		{"host", model.Sampling{Temperature: 1.0, TopP: 0.95, Seed: 99}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const steps = 12
			generate := func(b model.Backend, w *model.Weights, pipelined bool) []int {
				seq, err := b.NewSequence(len(ref.Prompt) + steps + 1)
				if err != nil {
					t.Fatal(err)
				}
				res, err := model.Prefill(b, w, seq, ref.Prompt, prefillChunk, model.Input{Sample: &c.s})
				if err != nil {
					t.Fatal(err)
				}
				ids := []int{res.Token}
				in := model.Input{Sample: &c.s}
				if !pipelined {
					for len(ids) <= steps {
						r, err := model.Run(b, w, seq, in)
						if err != nil {
							t.Fatal(err)
						}
						ids = append(ids, r.Token)
					}
					return ids
				}
				prev, err := model.Start(b, w, seq, in)
				if err != nil {
					t.Fatal(err)
				}
				for len(ids) <= steps {
					var next model.Pass
					if len(ids) < steps {
						if next, err = model.Start(b, w, seq, in); err != nil {
							t.Fatal(err)
						}
					}
					r, err := prev.Wait()
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, r.Token)
					prev = next
				}
				return ids
			}
			// f32 operands: a seeded draw compares a uniform variate with
			// cumulative probabilities, so equal tokens need logits equal
			// to about f32 rounding, which half operands do not give.
			gb, w := openModel(t, ref.Dir, Options{KVCacheF32: true, GEMMOperands: FloatOperands})
			got := generate(gb, w, c.pipelined)
			m, err := checkpoint.Load(ref.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cb, err := cpu.New(m.Weights, cpu.Options{Sampler: sample.New(), Precision: cpu.PrecisionExact})
			if err != nil {
				t.Fatal(err)
			}
			want := generate(cb, m.Weights, false)
			t.Logf("tokens %v", got)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("sampled continuation\n gpu %v\n cpu %v", got, want)
			}
			hs := gb.Stats().Decode.HostSamples
			if c.pipelined && hs != 0 || !c.pipelined && hs == 0 {
				t.Fatalf("%d tokens sampled on the host", hs)
			}
		})
	}
}
