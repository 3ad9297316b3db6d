package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Params is shorthand in the tables below.
type Params = model.Sampling

func TestArgmaxFirstOnTieAndIgnoresNaN(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		logits []float32
		want   int
	}{
		{[]float32{1, 3, 2}, 1},
		{[]float32{5, 5, 1}, 0},
		{[]float32{nan, 1, 2}, 2},
		{[]float32{float32(math.Inf(-1)), float32(math.Inf(-1))}, 0},
		{[]float32{-3, -1, -2}, 1},
	}
	for _, c := range cases {
		if got := Argmax(c.logits); got != c.want {
			t.Errorf("Argmax(%v) = %d, want %d", c.logits, got, c.want)
		}
	}
}

// TestPenaltiesExact checks the adjusted logits value by value: the numbers
// are small binary fractions, so float32 arithmetic is exact and the
// comparison is exact too.
func TestPenaltiesExact(t *testing.T) {
	logits := []float32{2, -2, 1, 0.5, 3}
	p := &Params{RepetitionPenalty: 2, PresencePenalty: 0.5, FrequencyPenalty: 0.25, GeneratedFrom: 2}
	// Prompt 0 1, then generated 3 3 4.
	history := []int{0, 1, 3, 3, 4}
	s := New()
	s.count(history, p.GeneratedFrom)
	work := append([]float32(nil), logits...)
	s.applyPenalties(work, p)
	// 0: prompt, positive → 2/2 = 1.
	// 1: prompt, negative → -2·2 = -4.
	// 2: unseen → 1.
	// 3: generated twice → 0.5/2 − 0.5 − 2·0.25 = −0.75.
	// 4: generated once → 3/2 − 0.5 − 0.25 = 0.75.
	want := []float32{1, -4, 1, -0.75, 0.75}
	if !slices.Equal(work, want) {
		t.Fatalf("penalised logits = %v, want %v", work, want)
	}
	// Greedy with penalties picks the argmax of the penalised logits: token
	// 4 (3) would win without them; with them 0 and 2 tie at 1, 0 first.
	if got := s.Sample(logits, p, history); got != 0 {
		t.Fatalf("greedy with penalties = %d, want 0", got)
	}
	if !slices.Equal(logits, []float32{2, -2, 1, 0.5, 3}) {
		t.Fatalf("Sample's input was modified: %v", logits)
	}
}

// TestIncrementalCountsMatchFresh grows a history token by token through one
// Sampler and checks each penalised row against a fresh Sampler's, then
// switches to an unrelated history (a new request) to exercise the reset.
func TestIncrementalCountsMatchFresh(t *testing.T) {
	p := &Params{RepetitionPenalty: 1.3, PresencePenalty: 0.7, FrequencyPenalty: 0.2, GeneratedFrom: 3}
	r := rand.New(rand.NewPCG(11, 12))
	logits := make([]float32, 50)
	for i := range logits {
		logits[i] = float32(r.NormFloat64())
	}
	grown := New()
	histories := [][]int{{5, 6, 7}, {9, 9, 1, 2}}
	for _, h := range histories {
		for step := 0; step < 40; step++ {
			h = append(h, r.IntN(50))
			grown.count(h, p.GeneratedFrom)
			a := append([]float32(nil), logits...)
			grown.applyPenalties(a, p)
			fresh := New()
			fresh.count(h, p.GeneratedFrom)
			b := append([]float32(nil), logits...)
			fresh.applyPenalties(b, p)
			if !slices.Equal(a, b) {
				t.Fatalf("history %v: incremental %v, fresh %v", h, a, b)
			}
		}
	}
}

func TestPresencePenaltyIgnoresPrompt(t *testing.T) {
	s := New()
	p := &Params{PresencePenalty: 10, GeneratedFrom: 1}
	if got := s.Sample([]float32{0, 1}, p, []int{1}); got != 1 {
		t.Fatalf("presence penalty applied to a prompt token: got %d, want 1", got)
	}
	if got := s.Sample([]float32{0, 1}, p, []int{1, 1}); got != 0 {
		t.Fatalf("presence penalty not applied to a generated token: got %d, want 0", got)
	}
}

// TestTopKMatchesFullSort compares the heap selection with a full sort on
// random logits that include ties (integers from a small range).
func TestTopKMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		n := 1 + r.IntN(3000)
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.IntN(200)) / 4
		}
		k := 1 + r.IntN(min(n, 64))
		got := topK(nil, logits, k)

		all := make([]candidate, n)
		for i, v := range logits {
			all[i] = candidate{i, v}
		}
		slices.SortStableFunc(all, func(a, b candidate) int {
			switch {
			case a.logit > b.logit:
				return -1
			case a.logit < b.logit:
				return 1
			}
			return 0
		})
		if !slices.Equal(got, all[:k]) {
			t.Fatalf("n=%d k=%d: heap top-k %v, sort gives %v", n, k, got, all[:k])
		}
	}
}

func TestSameSeedSameTokens(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	rows := make([][]float32, 64)
	for i := range rows {
		rows[i] = make([]float32, 1000)
		for j := range rows[i] {
			rows[i][j] = float32(r.NormFloat64() * 2)
		}
	}
	prompt := []int{3, 1, 4, 1, 5}
	run := func(seed uint64) []int {
		s := New()
		p := &Params{Temperature: 1, TopK: 50, TopP: 0.9, PresencePenalty: 0.5, GeneratedFrom: len(prompt), Seed: seed}
		history := slices.Clone(prompt)
		for _, row := range rows {
			history = append(history, s.Sample(row, p, history))
		}
		return history[len(prompt):]
	}
	a, b, c := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 42 gave two sequences:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatalf("seeds 42 and 43 gave the same 64 tokens: %v", a)
	}
}

// TestUniform checks the draw's range and its mean and variance over many
// positions (uniform on [0,1): mean 1/2, variance 1/12). With n = 200000 the
// standard error of the mean is sqrt(1/12/n) ≈ 6.5e-4; 5 of them is 3.2e-3.
func TestUniform(t *testing.T) {
	const n = 200000
	sum, sumSq := 0.0, 0.0
	for pos := range n {
		u := Uniform(1234, pos)
		if u < 0 || u >= 1 {
			t.Fatalf("Uniform(1234, %d) = %v, outside [0,1)", pos, u)
		}
		sum += u
		sumSq += u * u
	}
	mean := sum / n
	variance := sumSq/n - mean*mean
	if math.Abs(mean-0.5) > 3.2e-3 {
		t.Errorf("mean %.5f, want 0.5 ± 0.0032", mean)
	}
	if math.Abs(variance-1.0/12) > 3e-3 {
		t.Errorf("variance %.5f, want %.5f ± 0.003", variance, 1.0/12)
	}
	if Uniform(1, 5) == Uniform(2, 5) || Uniform(1, 5) == Uniform(1, 6) {
		t.Errorf("Uniform does not depend on both seed and position")
	}
}

// frequencies draws n tokens from logits with p, each at a new position
// (histories of growing length, penalties off), and returns the empirical
// distribution.
func frequencies(p Params, logits []float32, n int) []float64 {
	s := New()
	f := make([]float64, len(logits))
	history := make([]int, 0, n)
	for i := 0; i < n; i++ {
		f[s.Sample(logits, &p, history[:i])]++
		history = append(history, 0)
	}
	for i := range f {
		f[i] /= float64(n)
	}
	return f
}

// softmaxT is the reference distribution over the kept ids.
func softmaxT(logits []float32, temp float64, keep []int) []float64 {
	p := make([]float64, len(logits))
	sum := 0.0
	for _, id := range keep {
		p[id] = math.Exp(float64(logits[id]) / temp)
		sum += p[id]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// checkDistribution compares empirical and expected frequencies. Each count
// is binomial, so its standard deviation is sqrt(p(1−p)/n); 5 standard
// deviations leaves a false-failure chance below 1e-6 per entry while still
// catching any wrong filter, which moves a probability by far more. A token
// the reference excludes must never be drawn.
func checkDistribution(t *testing.T, got, want []float64, n int) {
	t.Helper()
	for i := range want {
		if want[i] == 0 {
			if got[i] != 0 {
				t.Errorf("token %d drawn %.4f of the time, want never", i, got[i])
			}
			continue
		}
		sd := math.Sqrt(want[i] * (1 - want[i]) / float64(n))
		if math.Abs(got[i]-want[i]) > 5*sd+1e-12 {
			t.Errorf("token %d: frequency %.4f, want %.4f ± %.4f (5σ)", i, got[i], want[i], 5*sd)
		}
	}
}

func TestDistributions(t *testing.T) {
	const n = 40000
	logits := []float32{2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0}
	cases := []struct {
		name string
		p    Params
		temp float64
		keep []int
	}{
		{"temperature 1", Params{Temperature: 1, Seed: 1}, 1, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"temperature 0.5", Params{Temperature: 0.5, Seed: 2}, 0.5, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"top-k 3", Params{Temperature: 1, TopK: 3, Seed: 3}, 1, []int{0, 1, 2}},
		// Probabilities at T=1: .4046 .2454 .1488 .0903 .0548 .0332 .0201 .0027,
		// cumulative .4046 .6500 .7989 .8892 .9439: top-p 0.6 stops at the second token.
		{"top-p 0.6", Params{Temperature: 1, TopP: 0.6, Seed: 4}, 1, []int{0, 1}},
		// min-p 0.2 keeps p ≥ 0.2·0.4046 = 0.0809: the first four.
		{"min-p 0.2", Params{Temperature: 1, MinP: 0.2, Seed: 5}, 1, []int{0, 1, 2, 3}},
		// top-k 5 first (renormalised: .4287 .2600 .1577 .0956 .0580),
		// then top-p 0.7: cumulative .4287 .6886 .8463 → three tokens.
		{"top-k 5 then top-p 0.7", Params{Temperature: 1, TopK: 5, TopP: 0.7, Seed: 6}, 1, []int{0, 1, 2}},
		// top-p 0.9 keeps five (cumulative .8892 after four, .9439 after five),
		// then min-p 0.15 (p ≥ .0607) drops the fifth (.0548).
		{"top-p 0.9 then min-p 0.15", Params{Temperature: 1, TopP: 0.9, MinP: 0.15, Seed: 7}, 1, []int{0, 1, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := frequencies(c.p, logits, n)
			checkDistribution(t, got, softmaxT(logits, c.temp, c.keep), n)
		})
	}
}

// TestLargeVocabulary runs top-p (top-k off) on the real model's
// vocabulary size, where only the bucketed cut keeps the work linear, and
// checks the kept set against a brute-force nucleus from a full sort: once
// with peaked logits (a nucleus of a few hundred tokens) and once with flat
// ones (tens of thousands).
func TestLargeVocabulary(t *testing.T) {
	const vocab = 248320
	cases := []struct {
		spread  float64
		p       Params
		minKeep int
	}{
		{3, Params{Temperature: 0.7, TopP: 0.8, Seed: 9}, 50},
		{1, Params{Temperature: 1, TopP: 0.9, MinP: 0.05, Seed: 10}, 10000},
	}
	for _, c := range cases {
		r := rand.New(rand.NewPCG(3, 4))
		logits := make([]float32, vocab)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * c.spread)
		}
		s := New()
		s.Sample(logits, &c.p, nil)

		// Brute force: sort everything, cut at TopP of the mass, then min-p.
		type pr struct {
			id int
			p  float64
		}
		all := make([]pr, vocab)
		maxL := slices.Max(logits)
		sum := 0.0
		temp := float64(c.p.Temperature)
		for i, v := range logits {
			all[i] = pr{i, math.Exp(float64(v-maxL) / temp)}
			sum += all[i].p
		}
		slices.SortFunc(all, func(a, b pr) int {
			if a.p > b.p {
				return -1
			}
			if a.p < b.p {
				return 1
			}
			return a.id - b.id
		})
		cum, keep := 0.0, 0
		for i := range all {
			cum += all[i].p
			if cum >= float64(c.p.TopP)*sum {
				keep = i + 1
				break
			}
		}
		var want []int
		for _, e := range all[:keep] {
			if e.p >= float64(c.p.MinP)*all[0].p {
				want = append(want, e.id)
			}
		}
		got := make([]int, len(s.cand))
		for i, c := range s.cand {
			got[i] = c.id
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("spread %v: nucleus has %d tokens, brute force %d, or they differ", c.spread, len(got), len(want))
		}
		if len(want) < c.minKeep {
			t.Fatalf("spread %v: the nucleus has only %d tokens: the case no longer exercises what it should", c.spread, len(want))
		}
		t.Logf("spread %v: %d tokens kept", c.spread, len(want))
	}
}

func TestValidate(t *testing.T) {
	bad := []Params{
		{Temperature: -1},
		{TopK: -2},
		{TopP: 1.5},
		{MinP: -0.1},
		{RepetitionPenalty: -1},
		{PresencePenalty: float32(math.Inf(1))},
	}
	for _, p := range bad {
		if Validate(&p) == nil {
			t.Errorf("Validate(%+v) = nil, want an error", p)
		}
	}
	good := Params{Temperature: 0.7, TopK: 20, TopP: 0.8, PresencePenalty: 1.5}
	if err := Validate(&good); err != nil {
		t.Errorf("Validate(model card defaults) = %v", err)
	}
}

func BenchmarkSampleTopK20(b *testing.B) {
	benchmarkSample(b, Params{Temperature: 0.7, TopK: 20, TopP: 0.8, PresencePenalty: 1.5, Seed: 1})
}

func BenchmarkSampleTopPOnly(b *testing.B) {
	benchmarkSample(b, Params{Temperature: 1, TopP: 0.95, Seed: 1})
}

func benchmarkSample(b *testing.B, p Params) {
	const vocab = 248320
	r := rand.New(rand.NewPCG(5, 6))
	logits := make([]float32, vocab)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	s := New()
	history := make([]int, 0, 1<<16)
	for b.Loop() {
		history = append(history, s.Sample(logits, &p, history))
	}
}

func TestModelCardDefaults(t *testing.T) {
	for _, c := range []struct {
		thinking bool
		want     Params
	}{
		{true, Params{Temperature: 1.0, TopP: 0.95, TopK: 20, PresencePenalty: 1.5}},
		{false, Params{Temperature: 0.7, TopP: 0.8, TopK: 20, PresencePenalty: 1.5}},
	} {
		got := ModelCardDefaults(c.thinking)
		if got != c.want {
			t.Errorf("thinking %v: %+v, want %+v", c.thinking, got, c.want)
		}
		if err := Validate(&got); err != nil {
			t.Errorf("thinking %v: %v", c.thinking, err)
		}
	}
}

// TestTopPCutFollowsLogitOrder: two distinct logits can give the same
// probability, because (l − max)/T is rounded to float32 before exp (here
// 1 and the next float above it are both 3 below the largest logit 4). When
// top-p's cut falls between them the survivor must be the one with the
// larger logit, the next in the descending order the GPU sampler walks and
// transformers sorts by, not the one with the lower id.
func TestTopPCutFollowsLogitOrder(t *testing.T) {
	above := math.Nextafter32(1, 2)
	logits := []float32{4, 1, above}
	if logits[1]-logits[0] != logits[2]-logits[0] {
		t.Fatal("the two logits no longer round to one probability; the test needs another pair")
	}
	// Probabilities ∝ 1, e⁻³, e⁻³ (total 1.0996): top-p 0.93 needs mass
	// 1.0226, which the largest and one of the pair reach.
	s := New()
	drew := map[int]int{}
	for seed := range uint64(400) {
		drew[s.Sample(logits, &Params{Temperature: 1, TopP: 0.93, Seed: seed}, nil)]++
	}
	if drew[1] != 0 {
		t.Errorf("id 1 (logit 1) was drawn %d times; top-p keeps id 2 (logit %v) of the equal pair", drew[1], above)
	}
	// e⁻³/(1+e⁻³) ≈ 4.7% of 400 draws: about 19 should pick the pair.
	if drew[2] < 5 {
		t.Errorf("id 2 was drawn %d times in 400, want about 19", drew[2])
	}
}

// RandomSeed draws from the system's random source: 64 draws are
// distinct (a repeat among 64 uniform 64-bit draws has odds near 1e-16).
func TestRandomSeed(t *testing.T) {
	seen := map[uint64]bool{}
	for range 64 {
		s := RandomSeed()
		if seen[s] {
			t.Fatalf("seed %d drawn twice in 64 draws", s)
		}
		seen[s] = true
	}
}
