// Package sample chooses the next token from a row of logits: the host
// implementation of model.Sampler, which the CPU backend's sample block
// calls, and the written definition of the rule a GPU sample block follows.
//
// A draw is a pure function of the logits, the parameters (model.Sampling)
// and the sequence's token history, so generation is reproducible (one seed
// gives one token sequence), survives a prefix-cache restore unchanged, and
// can run on a device without host state. The pipeline:
//
//  1. penalties: repetition (Hugging Face), then presence and frequency
//     (OpenAI), on a private copy so the caller's logits are never changed;
//  2. greedy: with Temperature ≤ 0 the largest adjusted logit wins (the
//     lowest id on a tie), and nothing below runs;
//  3. temperature: logits divided by Temperature;
//  4. top-k: the K largest logits, found by partial selection (a size-K
//     min-heap, O(V log K)), never by sorting the whole vocabulary; exactly
//     K survive, the lower id first among equal logits (transformers keeps
//     every token tied with the K-th, which differs only on exact ties);
//  5. softmax over the survivors (float64);
//  6. top-p then min-p, as transformers' TopPLogitsWarper and
//     MinPLogitsWarper in that order: top-p keeps the shortest prefix of the
//     descending order (by logit, the lower id first among equal logits, as
//     top-k selects; two distinct logits can round to one probability, so
//     the order is never by probability) whose mass reaches TopP, min-p keeps
//     tokens whose probability is at least MinP times the largest;
//  7. one draw: u = Uniform(Seed, position) in [0, 1), position being
//     len(history) (the position of the token being chosen), and the token
//     is the first whose cumulative mass exceeds u·total, walking the
//     survivors in the order they were selected (descending logit after
//     top-k; ascending id when top-k is off).
//
// Which tokens the penalties look at:
//   - RepetitionPenalty follows transformers' RepetitionPenaltyLogitsProcessor:
//     every distinct token of the history, prompt and generated alike,
//     positive logits divided by the penalty and negative ones multiplied.
//   - PresencePenalty and FrequencyPenalty follow OpenAI's definition and
//     vLLM's implementation: generated tokens only (history[GeneratedFrom:]),
//     logit −= presence·[c>0] + frequency·c where c is how often the token
//     was generated. The prompt is left out so that a long conversation does
//     not push the model away from the words the user is asking about.
package sample

import (
	"container/heap"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Validate checks the ranges a client could get wrong, with a message that
// names the field.
func Validate(p *model.Sampling) error {
	bad := func(option string, value any, rule string) error {
		return &OptionError{Option: option, Value: value, Rule: rule}
	}
	switch {
	case math.IsNaN(float64(p.Temperature)) || p.Temperature < 0 || math.IsInf(float64(p.Temperature), 0):
		return bad("temperature", p.Temperature, "must be 0 (greedy) or positive")
	case p.TopK < 0:
		return bad("top_k", p.TopK, "must be 0 (off) or positive")
	case !(p.TopP >= 0 && p.TopP <= 1):
		return bad("top_p", p.TopP, "must be in [0, 1]")
	case !(p.MinP >= 0 && p.MinP <= 1):
		return bad("min_p", p.MinP, "must be in [0, 1]")
	case !(p.RepetitionPenalty >= 0) || math.IsInf(float64(p.RepetitionPenalty), 0):
		return bad("repetition_penalty", p.RepetitionPenalty, "must be positive (1 = off)")
	case math.IsNaN(float64(p.PresencePenalty)) || math.IsInf(float64(p.PresencePenalty), 0):
		return bad("presence_penalty", p.PresencePenalty, "must be a finite number")
	case math.IsNaN(float64(p.FrequencyPenalty)) || math.IsInf(float64(p.FrequencyPenalty), 0):
		return bad("frequency_penalty", p.FrequencyPenalty, "must be a finite number")
	}
	return nil
}

// OptionError is a generation option out of its range. Option names it as
// the HTTP APIs spell it (temperature, top_p, max_tokens, …), so that a
// caller can point at the field, or at its own flag, without reading the
// message.
type OptionError struct {
	Option string
	Value  any
	Rule   string // what the value must be
}

func (e *OptionError) Error() string { return fmt.Sprintf("%s %v: %s", e.Option, e.Value, e.Rule) }

// Uniform is the draw for the token at position pos of a request seeded with
// seed: SplitMix64 of seed + (pos+1)·γ, its top 53 bits scaled to [0, 1).
// A counter-based generator needs no state between tokens, so a GPU sample
// block computes the same value from the same two integers.
func Uniform(seed uint64, pos int) float64 {
	z := seed + uint64(pos+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) * (1.0 / (1 << 53))
}

// Sampler is the host model.Sampler. It keeps scratch buffers and the token
// counts of the history it saw last, so that consecutive calls during one
// generation cost O(new tokens) for the penalties instead of O(history). It
// is not safe for concurrent use: the engine goroutine owns it.
type Sampler struct {
	// counted is the history the counts below describe, and from is the
	// GeneratedFrom it was counted with.
	counted []int
	from    int
	// all counts every token of counted (repetition penalty); generated
	// those of counted[from:] (presence and frequency).
	all, generated map[int]int

	work  []float32 // penalised copy of the logits
	cand  []candidate
	probs []float64
}

var _ model.Sampler = (*Sampler)(nil)

// candidate is one token that survived the filters so far.
type candidate struct {
	id    int
	logit float32
}

// New returns a Sampler.
func New() *Sampler {
	return &Sampler{all: make(map[int]int), generated: make(map[int]int)}
}

// Sample implements model.Sampler: it returns the next token for one row of
// logits, given the parameters and the sequence's whole token history.
// logits is read, never written.
func (s *Sampler) Sample(logits []float32, p *model.Sampling, history []int) int {
	if len(logits) == 0 {
		panic("sample: empty logits")
	}
	if penaltiesOn(p) {
		s.count(history, p.GeneratedFrom)
		s.work = append(s.work[:0], logits...)
		s.applyPenalties(s.work, p)
		logits = s.work
	}
	if p.Temperature <= 0 {
		return Argmax(logits)
	}
	return s.draw(logits, p, Uniform(p.Seed, len(history)))
}

func repetitionOn(p *model.Sampling) bool {
	return p.RepetitionPenalty != 0 && p.RepetitionPenalty != 1
}

func penaltiesOn(p *model.Sampling) bool {
	return repetitionOn(p) || p.PresencePenalty != 0 || p.FrequencyPenalty != 0
}

// count brings the token counts up to date with history, adding only the
// tokens after the previously counted history when history extends it.
func (s *Sampler) count(history []int, from int) {
	from = min(max(from, 0), len(history))
	extends := from == s.from && len(history) >= len(s.counted) &&
		slices.Equal(history[:len(s.counted)], s.counted)
	if !extends {
		clear(s.all)
		clear(s.generated)
		s.counted, s.from = s.counted[:0], from
	}
	for i := len(s.counted); i < len(history); i++ {
		id := history[i]
		s.all[id]++
		if i >= from {
			s.generated[id]++
		}
	}
	s.counted = append(s.counted, history[len(s.counted):]...)
}

// applyPenalties changes only the entries of tokens in the history, so it
// costs O(distinct tokens), not O(vocabulary).
func (s *Sampler) applyPenalties(l []float32, p *model.Sampling) {
	if rp := p.RepetitionPenalty; repetitionOn(p) {
		for id := range s.all {
			if id < 0 || id >= len(l) {
				continue
			}
			if l[id] > 0 {
				l[id] /= rp
			} else {
				l[id] *= rp
			}
		}
	}
	pp, fp := p.PresencePenalty, p.FrequencyPenalty
	if pp == 0 && fp == 0 {
		return
	}
	for id, c := range s.generated {
		if id < 0 || id >= len(l) || c == 0 {
			continue
		}
		l[id] -= pp + fp*float32(c)
	}
}

// Argmax returns the index of the largest value, the lowest index on a tie
// (as torch.argmax does). NaN entries never win.
func Argmax(l []float32) int {
	best, bestV := 0, float32(math.Inf(-1))
	found := false
	for i, v := range l {
		if v > bestV || (!found && v == bestV) {
			best, bestV, found = i, v, true
		}
	}
	return best
}

// draw runs temperature, top-k, softmax, top-p, min-p and one draw.
func (s *Sampler) draw(logits []float32, p *model.Sampling, uniform float64) int {
	invT := 1 / p.Temperature

	// Top-k by partial selection, or every finite logit when top-k is off.
	k := p.TopK
	if k <= 0 || k >= len(logits) {
		s.cand = s.cand[:0]
		for id, v := range logits {
			if !math.IsInf(float64(v), -1) && !math.IsNaN(float64(v)) {
				s.cand = append(s.cand, candidate{id, v})
			}
		}
	} else {
		s.cand = topK(s.cand[:0], logits, k)
	}
	if len(s.cand) == 0 {
		// Every logit was -inf or NaN: nothing to sample from, fall back to
		// the argmax so the caller gets a valid id rather than a panic.
		return Argmax(logits)
	}

	// Softmax in float64 over the survivors, relative to the largest logit.
	maxL := float32(math.Inf(-1))
	for _, c := range s.cand {
		maxL = max(maxL, c.logit)
	}
	s.probs = s.probs[:0]
	total := 0.0
	pmax := 0.0
	for _, c := range s.cand {
		e := math.Exp(float64((c.logit - maxL) * invT))
		s.probs = append(s.probs, e)
		total += e
		pmax = max(pmax, e)
	}

	topPOn := p.TopP > 0 && p.TopP < 1
	if topPOn || p.MinP > 0 {
		s.nucleus(p, total, pmax)
		total = 0
		for _, e := range s.probs {
			total += e
		}
	}

	u := uniform * total
	for i, e := range s.probs {
		u -= e
		if u < 0 {
			return s.cand[i].id
		}
	}
	// Rounding left u a hair above zero: the last candidate with mass wins.
	for i := len(s.probs) - 1; i >= 0; i-- {
		if s.probs[i] > 0 {
			return s.cand[i].id
		}
	}
	return s.cand[0].id
}

// nucleus applies top-p then min-p to s.cand/s.probs (unnormalised, summing
// to total, largest pmax) and leaves only the survivors.
//
// Both filters keep a prefix of the descending order, and min-p's ratio test
// does not change under renormalisation, so applying them in transformers'
// order equals keeping the shorter of the two prefixes, each measured on the
// distribution after top-k.
//
// The top-p prefix is found without sorting the vocabulary: the candidates
// are bucketed by logit (a monotone key, so buckets are contiguous runs of
// the descending order), whole buckets are taken while their mass stays
// short of TopP, and only the one bucket that crosses it is sorted. With
// top-k off on a 248k vocabulary this is two linear passes and a small sort
// instead of a sort of every token.
func (s *Sampler) nucleus(p *model.Sampling, total, pmax float64) {
	minKeep := float64(p.MinP) * pmax
	topP := float64(p.TopP)
	if !(topP > 0 && topP < 1) {
		topP = 1
	}

	// The top-p prefix is cut in the candidates' descending order: by
	// logit, the lower id first among equal logits. Two distinct logits can
	// share a probability ((l−max)/T is rounded to float32 before exp), so
	// the cut is a logit and an id, not a probability: cutLogit is the
	// smallest logit that survives, and a token with that logit survives
	// only if its id is at most cutID.
	cutLogit, cutID := float32(math.Inf(-1)), math.MaxInt
	if topP < 1 {
		cutLogit, cutID = s.topPCut(topP * total)
	}
	n := 0
	for i, e := range s.probs {
		c := s.cand[i]
		if e < minKeep || c.logit < cutLogit || (c.logit == cutLogit && c.id > cutID) {
			continue
		}
		s.cand[n], s.probs[n] = s.cand[i], e
		n++
	}
	if n == 0 {
		// MinP of 1 with ties or rounding at the edge: keep the most likely.
		best := 0
		for i, e := range s.probs {
			if e > s.probs[best] {
				best = i
			}
		}
		s.cand[0], s.probs[0] = s.cand[best], s.probs[best]
		n = 1
	}
	s.cand, s.probs = s.cand[:n], s.probs[:n]
}

// nucleusBuckets is the number of logit buckets topPCut uses: enough that
// the crossing bucket holds a small share of a 248k vocabulary.
const nucleusBuckets = 4096

// topPCut returns the logit and id of the last token of the shortest prefix
// of the descending order (logit, then lower id) whose mass reaches target.
func (s *Sampler) topPCut(target float64) (float32, int) {
	lo, hi := s.cand[0].logit, s.cand[0].logit
	for _, c := range s.cand {
		lo, hi = min(lo, c.logit), max(hi, c.logit)
	}
	bucket := func(l float32) int { return 0 }
	if hi > lo {
		scale := float64(nucleusBuckets-1) / float64(hi-lo)
		// Bucket 0 holds the largest logits.
		bucket = func(l float32) int { return int(float64(hi-l) * scale) }
	}
	var mass [nucleusBuckets]float64
	for i, c := range s.cand {
		mass[bucket(c.logit)] += s.probs[i]
	}
	cum, cross := 0.0, -1
	for b := range mass {
		if cum+mass[b] >= target {
			cross = b
			break
		}
		cum += mass[b]
	}
	if cross < 0 {
		// Rounding kept the whole mass a hair short of target: keep all.
		return float32(math.Inf(-1)), math.MaxInt
	}
	// Sort the crossing bucket and walk it until the mass is reached.
	var inside []int
	for i, c := range s.cand {
		if bucket(c.logit) == cross {
			inside = append(inside, i)
		}
	}
	slices.SortFunc(inside, func(a, b int) int { return compareDesc(s.cand[a], s.cand[b]) })
	for _, i := range inside {
		cum += s.probs[i]
		if cum >= target {
			return s.cand[i].logit, s.cand[i].id
		}
	}
	// Rounding kept the sum a hair short: keep the whole bucket.
	last := inside[len(inside)-1]
	return s.cand[last].logit, s.cand[last].id
}

// topK appends the k largest finite logits to dst, in descending order (lower
// id first on ties), using a size-k min-heap: one pass over the vocabulary,
// and a heap operation only for the rare logit that beats the current k-th.
func topK(dst []candidate, logits []float32, k int) []candidate {
	h := minHeap(dst[:0])
	for id, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), -1) {
			continue
		}
		if len(h) < k {
			heap.Push(&h, candidate{id, v})
			continue
		}
		// Strictly greater: on a tie the earlier (lower) id stays, matching
		// a stable descending sort.
		if v > h[0].logit {
			h[0] = candidate{id, v}
			heap.Fix(&h, 0)
		}
	}
	out := []candidate(h)
	slices.SortFunc(out, compareDesc)
	return out
}

// compareDesc is the descending order of candidates: larger logit first,
// the lower id first among equal logits.
func compareDesc(a, b candidate) int {
	switch {
	case a.logit > b.logit:
		return -1
	case a.logit < b.logit:
		return 1
	}
	return a.id - b.id
}

// minHeap orders candidates with the smallest logit (and, among equals, the
// highest id, the first to give way) at the root.
type minHeap []candidate

func (h minHeap) Len() int { return len(h) }
func (h minHeap) Less(i, j int) bool {
	if h[i].logit != h[j].logit {
		return h[i].logit < h[j].logit
	}
	return h[i].id > h[j].id
}
func (h minHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)   { *h = append(*h, x.(candidate)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// The model card's sampling presets, by name (engine/model/MODEL.md).
const (
	PresetThinking    = "thinking"
	PresetNonThinking = "non-thinking"
	PresetCoding      = "coding"
)

// presets are the sampling parameters the Qwen3.6-35B-A3B model card
// recommends: with thinking, temperature 1.0, top-p 0.95, top-k 20,
// presence penalty 1.5; without, temperature 0.7, top-p 0.8, top-k 20,
// presence penalty 1.5; for coding (with thinking), temperature 0.6,
// top-p 0.95, top-k 20, no presence penalty; min-p 0 in all.
var presets = map[string]model.Sampling{
	PresetThinking:    {Temperature: 1.0, TopP: 0.95, TopK: 20, PresencePenalty: 1.5},
	PresetNonThinking: {Temperature: 0.7, TopP: 0.8, TopK: 20, PresencePenalty: 1.5},
	PresetCoding:      {Temperature: 0.6, TopP: 0.95, TopK: 20, PresencePenalty: 0},
}

// Preset returns the model card's preset name; false for a name it does
// not have.
func Preset(name string) (model.Sampling, bool) {
	p, ok := presets[name]
	return p, ok
}

// RandomSeed draws a seed for a request that names none, from the
// system's random source: answers differ from one request to the next,
// and a request that gives its seed repeats.
func RandomSeed() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// ModelCardDefaults are the model card's thinking or non-thinking preset.
// Requests that leave a parameter out get these; the seed is left to the
// caller.
func ModelCardDefaults(thinking bool) model.Sampling {
	if thinking {
		return presets[PresetThinking]
	}
	return presets[PresetNonThinking]
}
