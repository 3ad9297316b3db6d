package gpu

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

func TestArgmax(t *testing.T) {
	rng := testRand(t)
	for _, vocab := range []int{1, 33, 4096, 10007} {
		t.Run(fmt.Sprint("vocab", vocab), func(t *testing.T) {
			logits := randFloats(rng, vocab, 10)
			if vocab > 100 {
				// The largest value twice, in two chunks: the lower id wins.
				logits[vocab-1], logits[vocab/3] = 20, 20
			}
			chunks := ceilDiv(vocab, argmaxChunk)
			got := twice(t, func(r *kernelRig) [][]byte {
				out := r.zeros(4)
				r.run(func(e *encoder) {
					e.argmax(r.buf(f32Bytes(logits)), vocab, r.zeros(4*chunks), r.zeros(4*chunks), out)
				})
				return [][]byte{out.buf.Bytes()[:4]}
			})
			want := 0
			for i, v := range logits {
				if v > logits[want] {
					want = i
				}
			}
			if g := int(int32(binary.LittleEndian.Uint32(got[0]))); g != want {
				t.Fatalf("argmax %d, want %d", g, want)
			}
		})
	}
}

// TestArgmaxSteps chooses the greedy ids of 11 rows in one call (two pairs
// of dispatches of at most 8 rows), each row in its own buffer and its id
// written to its own slot, ties placed across chunks; every id must be the
// lowest index of its row's largest logit, as a sequential scan finds it.
func TestArgmaxSteps(t *testing.T) {
	rng := testRand(t)
	const n, vocab = 11, 10007
	rows := make([][]float32, n)
	want := make([]int, n)
	for z := range rows {
		rows[z] = randFloats(rng, vocab, 10)
		if z%2 == 0 {
			a, b := rng.IntN(vocab), rng.IntN(vocab)
			rows[z][a], rows[z][b] = 20, 20
		}
		for i, v := range rows[z] {
			if v > rows[z][want[z]] {
				want[z] = i
			}
		}
	}
	chunks := ceilDiv(vocab, argmaxChunk)
	got := twice(t, func(r *kernelRig) [][]byte {
		logits, outs := make([]loc, n), make([]loc, n)
		for z := range n {
			logits[z] = r.buf(f32Bytes(rows[z]))
			// The id goes to slot 2 of a ring of 4.
			outs[z] = loc{r.zeros(16).buf, 8}
		}
		r.run(func(e *encoder) {
			e.argmaxSteps(logits, vocab, r.zeros(4*stepMaxSeqs*chunks), r.zeros(4*stepMaxSeqs*chunks), outs)
		})
		out := make([][]byte, n)
		for z := range n {
			out[z] = append([]byte(nil), outs[z].buf.Bytes()...)
		}
		return out
	})
	for z := range n {
		ring := got[z]
		if g := int(int32(binary.LittleEndian.Uint32(ring[8:]))); g != want[z] {
			t.Fatalf("row %d: argmax %d, want %d", z, g, want[z])
		}
		if !bytes.Equal(ring[:8], make([]byte, 8)) || !bytes.Equal(ring[12:], make([]byte, 4)) {
			t.Fatalf("row %d: the ring's other slots were written: % x", z, ring)
		}
	}
}

// TestSample draws tokens on the device and with engine/sample's host
// sampler from the same logits and parameters. The penalised logits must be
// equal bit for bit (both sides do the same f32 operations) and so must the
// top-k survivors (plain comparisons of f32 logits, lower id first on ties).
// The device then sums the probabilities in f32 where the host uses f64, so
// the ids may differ when a sum lands within rounding of a decision boundary:
// about once in 1,500 runs of this test (~100,000 draws), the run seeded
// 1795954632034809036 being one (case 2 draw 6: u·kept fell 1.25e-7 of the
// total mass short of a cumulative boundary). A differing id is accepted only when sampleRef shows it is the
// choice on the other side of such a boundary, within sampleBoundaryEps.
func TestSample(t *testing.T) {
	rng := testRand(t)
	cases := []model.Sampling{
		{Temperature: 0.7, TopK: 20, TopP: 0.8, Seed: 1},
		{Temperature: 1.0, TopK: 1},
		{Temperature: 1.3, TopK: 256, TopP: 0.95, MinP: 0.05},
		{Temperature: 0.6, TopK: 40, RepetitionPenalty: 1.3, PresencePenalty: 1.5, FrequencyPenalty: 0.4, GeneratedFrom: 30},
		{RepetitionPenalty: 2, PresencePenalty: 1}, // greedy after penalties
		{Temperature: 0.9, TopK: 7, MinP: 0.5},
		{Temperature: 0.3, TopK: 20, TopP: 0.9}, // ties with the largest logit
		{Temperature: 5, TopK: 4},               // ties across the top-k boundary
	}
	// tieRank: for these cases four tokens are given one value that ranks at
	// that place, so that the order among equal logits (lower id first)
	// decides the draw order (rank 1, a low temperature puts most of the mass
	// there) or which of them survive top-k (rank K, a high temperature makes
	// the last survivor as likely as any).
	tieRank := map[int]int{6: 1, 7: 4}
	const vocab = 10007 // three top-k chunks, the last partial
	for ci, c := range cases {
		t.Run(fmt.Sprint(ci), func(t *testing.T) {
			host := sample.New()
			logits, history, seeds := randSampleDraws(rng, 12, vocab, tieRank[ci])
			// Each draw returns the token id and the (penalised) row.
			got := twice(t, func(r *kernelRig) [][]byte {
				var out [][]byte
				for d := range logits {
					s := c
					s.Seed = seeds[d]
					hb := make([]byte, 4*len(history[d]))
					for i, id := range history[d] {
						binary.LittleEndian.PutUint32(hb[4*i:], uint32(id))
					}
					row := r.buf(f32Bytes(logits[d]))
					tok := r.zeros(4)
					r.run(func(e *encoder) {
						if penaltiesOn(&s) {
							e.penalties(&s, r.buf(hb), len(history[d]), r.zeros(4*vocab), r.zeros(4*vocab), row)
						}
						if s.Temperature <= 0 {
							chunks := ceilDiv(vocab, argmaxChunk)
							e.argmax(row, vocab, r.zeros(4*chunks), r.zeros(4*chunks), tok)
							return
						}
						chunks := ceilDiv(vocab, topkChunk)
						e.topK(&s, topKBufs{logits: row, candVal: r.zeros(4 * chunks * s.TopK), candID: r.zeros(4 * chunks * s.TopK), out: tok},
							vocab, len(history[d]))
					})
					out = append(out, append([]byte(nil), tok.buf.Bytes()[:4]...),
						append([]byte(nil), row.buf.Bytes()[row.off:row.off+4*vocab]...))
				}
				return out
			})
			for d := range logits {
				s := c
				s.Seed = seeds[d]
				want := host.Sample(logits[d], &s, history[d])
				penalised := penalise(logits[d], &s, history[d])
				if !bytes.Equal(got[2*d+1], f32Bytes(penalised)) {
					t.Fatalf("draw %d: the device's penalised logits differ from engine/sample's rule", d)
				}
				g := int(int32(binary.LittleEndian.Uint32(got[2*d])))
				if g == want {
					continue
				}
				if s.Temperature <= 0 {
					t.Fatalf("draw %d: greedy: device chose %d, host %d", d, g, want)
				}
				ref := sampleRef(penalised, &s, len(history[d]))
				if !ref.allows(want) {
					t.Fatalf("draw %d: host chose %d, which the reference does not allow:\n%s", d, want, ref.report)
				}
				if !ref.allows(g) {
					t.Fatalf("draw %d: device chose %d, host %d; no decision was within %g of a boundary:\n%s",
						d, g, want, sampleBoundaryEps, ref.report)
				}
				t.Logf("draw %d: device chose %d, host %d, a choice within f32 rounding of a boundary:\n%s", d, g, want, ref.report)
			}
		})
	}
}

// randSampleDraws are TestSample's draws: each a row of vocab logits, a
// history and a seed. Logits are bunched near the top so that penalties
// and the filters change the outcome, with a few −inf and NaN entries;
// with tieRank > 0, four of them tie at that rank (tieAtRank).
func randSampleDraws(rng *rand.Rand, draws, vocab, tieRank int) (logits [][]float32, history [][]int, seeds []uint64) {
	logits = make([][]float32, draws)
	history = make([][]int, draws)
	seeds = make([]uint64, draws)
	for d := range logits {
		logits[d] = randFloats(rng, vocab, 3)
		for i := 0; i < 5; i++ {
			logits[d][rng.IntN(vocab)] = float32(math.Inf(-1))
		}
		logits[d][rng.IntN(vocab)] = float32(math.NaN())
		history[d] = make([]int, 40+rng.IntN(30))
		for i := range history[d] {
			// Repeats, and tokens among the largest logits.
			history[d][i] = rng.IntN(60)
			logits[d][history[d][i]] = 3 + float32(rng.Float64())
		}
		if tieRank > 0 {
			tieAtRank(rng, logits[d], tieRank)
		}
		seeds[d] = rng.Uint64()
	}
	return logits, history, seeds
}

// tieAtRank gives four tokens outside the history (ids ≥ 60) one value: the
// largest logit for rank 1, else one between the (rank−1)-th and rank-th
// largest, so that the tied tokens start at that rank. Two of them are one
// thread's stride apart in a top-k chunk, one is in the next chunk and one
// anywhere, so that every level of the device's selection meets a tie.
func tieAtRank(rng *rand.Rand, logits []float32, rank int) {
	var sorted []float32
	for _, v := range logits {
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), -1) {
			sorted = append(sorted, v)
		}
	}
	slices.SortFunc(sorted, func(a, b float32) int { return cmp.Compare(b, a) })
	v := sorted[0]
	if rank > 1 {
		v = sorted[rank-2] + (sorted[rank-1]-sorted[rank-2])/2
	}
	j := 60 + rng.IntN(topkChunk)
	ids := []int{j, j + topkThreads, j + topkChunk + 7}
	for len(ids) < 4 {
		if id := 60 + rng.IntN(len(logits)-60); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		logits[id] = v
	}
}

// sampleBoundaryEps is how close, as a fraction of the total probability
// mass, a sum must come to a decision boundary for the device's f32 result
// to be allowed to fall on the other side of it. The device adds up to 256
// probabilities of at most 1 in f32: the recursive-summation error bound is
// (n−1)·2⁻²⁴ ≈ 1.5e-5 of the total; expf adds a few ulps per term and the
// uniform is rounded to f32 (2⁻²⁴ relative). The typical error is far
// smaller (√n·2⁻²⁴ ≈ 1e-6), so the bound is loose but a wrong rule is not
// hidden by it: it must also name the exact token across the boundary.
const sampleBoundaryEps = 2e-5

// penalise applies engine/sample's penalties to a copy of logits, as its
// package doc defines them: repetition over every distinct history token
// (positive logits divided, others multiplied), then presence and frequency
// over history[GeneratedFrom:], in f32 as both samplers compute them.
func penalise(logits []float32, s *model.Sampling, history []int) []float32 {
	l := append([]float32(nil), logits...)
	if !penaltiesOn(s) {
		return l
	}
	seen := map[int]bool{}
	counts := map[int]int{}
	from := min(max(s.GeneratedFrom, 0), len(history))
	for i, id := range history {
		seen[id] = true
		if i >= from {
			counts[id]++
		}
	}
	for id := range seen {
		if rp := s.RepetitionPenalty; rp != 0 && rp != 1 {
			if l[id] > 0 {
				l[id] /= rp
			} else {
				l[id] *= rp
			}
		}
		if c := counts[id]; c > 0 && (s.PresencePenalty != 0 || s.FrequencyPenalty != 0) {
			l[id] -= s.PresencePenalty + s.FrequencyPenalty*float32(c)
		}
	}
	return l
}

// sampleChoices is the set of tokens a correct sampler may draw for one row:
// the float64 choice, plus the choice across each decision boundary that a
// sum came within sampleBoundaryEps of.
type sampleChoices struct {
	ids    map[int]bool
	report string // the candidates near each close boundary, for a failure
}

func (c *sampleChoices) allows(id int) bool { return c.ids[id] }

// sampleRef follows engine/sample's rule in float64 on penalised logits
// (top-k, so Temperature > 0 and 0 < TopK < len(logits)): survivors in
// descending logit order, lower id first; p = exp((l−max)/T); top-p keeps
// the shortest prefix whose mass reaches TopP of the total; min-p keeps those
// with p ≥ MinP·pmax; the draw is the first survivor whose cumulative mass
// exceeds u·kept. Where a top-p, min-p or draw comparison is within
// sampleBoundaryEps of equality both outcomes are followed.
func sampleRef(logits []float32, s *model.Sampling, position int) *sampleChoices {
	type cand struct {
		id    int
		logit float32
	}
	var cs []cand
	for id, v := range logits {
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), -1) {
			cs = append(cs, cand{id, v})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Compare(b.logit, a.logit) })
	cs = cs[:min(s.TopK, len(cs))]
	out := &sampleChoices{ids: map[int]bool{}}
	if len(cs) == 0 {
		out.ids[0] = true
		return out
	}
	invT := 1 / s.Temperature
	cum := make([]float64, len(cs)) // cum[i]: mass of cs[0..i]
	total := 0.0
	for i, c := range cs {
		total += math.Exp(float64((c.logit - cs[0].logit) * invT))
		cum[i] = total
	}
	prob := func(i int) float64 { return math.Exp(float64((cs[i].logit - cs[0].logit) * invT)) }
	eps := sampleBoundaryEps * total
	note := func(what string, i int, x float64) {
		out.report += fmt.Sprintf("  %s: index %d (id %d, logit %v, p %.9g): cum %.12g vs %.12g, gap %.3g of the total\n",
			what, i, cs[i].id, cs[i].logit, prob(i)/total, cum[i]/total, x/total, (cum[i]-x)/total)
	}

	// Possible top-p prefix lengths: the float64 one, and any other whose
	// cumulative mass is within eps of the target.
	topP := map[int]bool{}
	if s.TopP > 0 && s.TopP < 1 {
		target := float64(s.TopP) * total
		exact := len(cs)
		for i := range cs {
			if cum[i] >= target {
				exact = i + 1
				break
			}
		}
		topP[exact] = true
		for i := range cs {
			if math.Abs(cum[i]-target) <= eps {
				topP[i+1] = true
				note("top-p cut", i, target)
			}
		}
	} else {
		topP[len(cs)] = true
	}
	// Possible min-p prefix lengths (p is monotone along the order, and
	// pmax = 1).
	minP := map[int]bool{len(cs): true}
	if s.MinP > 0 {
		minP = map[int]bool{}
		keep := float64(s.MinP)
		exact := 0
		for exact < len(cs) && prob(exact) >= keep {
			exact++
		}
		minP[exact] = true
		for i := range cs {
			if math.Abs(prob(i)-keep) <= sampleBoundaryEps {
				minP[i] = true
				minP[i+1] = true
				out.report += fmt.Sprintf("  min-p threshold: index %d (id %d, logit %v): p/pmax %.12g vs %.12g\n",
					i, cs[i].id, cs[i].logit, prob(i), keep)
			}
		}
	}
	u := sample.Uniform(s.Seed, position)
	for kp := range topP {
		for km := range minP {
			keep := max(min(kp, km), 1)
			x := u * cum[keep-1]
			pick := keep - 1
			for i := 0; i < keep; i++ {
				if cum[i] > x {
					pick = i
					break
				}
			}
			out.ids[cs[pick].id] = true
			for i := 0; i+1 < keep; i++ {
				if math.Abs(cum[i]-x) <= eps {
					out.ids[cs[i].id], out.ids[cs[i+1].id] = true, true
					note(fmt.Sprintf("draw boundary (keep %d, u %.12g)", keep, u), i, x)
				}
			}
		}
	}
	return out
}
