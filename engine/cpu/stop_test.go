//go:build unix

package cpu

import (
	"errors"
	"math"
	"slices"
	"sort"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// stopPrompt is n token ids of the demo model's vocabulary.
func stopPrompt(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*37 + 5) % 4000
	}
	return ids
}

// stopPass runs one pass over ids on a fresh sequence, in runs of
// blockRows rows (0: the backend's), asking stop (if any) inside it. The
// pass returns the residual stream after every layer and the last logits.
// w may hold the first layers of the backend's weights only.
func stopPass(t *testing.T, b *Backend, w *model.Weights, ids []int, blockRows int, stop func() bool) (model.Result, model.Sequence, error) {
	t.Helper()
	seq, err := b.NewSequence(len(ids) + 1)
	if err != nil {
		t.Fatal(err)
	}
	segs := []model.Segment{{Seq: seq, In: model.Input{IDs: ids, Logits: model.LogitsLast, Hidden: true}}}
	p, err := b.Begin(segs)
	if err != nil {
		t.Fatal(err)
	}
	p.(*pass).blockRows = blockRows
	if stop != nil {
		p.(model.Stopper).StopWhen(stop)
	}
	model.Forward(p, w, segs)
	p.Submit()
	res, err := p.Wait()
	if err != nil {
		return model.Result{}, seq, err
	}
	return res[0], seq, nil
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// sameResult compares two passes' residual streams and logits bit for bit.
func sameResult(t *testing.T, what string, got, want model.Result) {
	t.Helper()
	for i := range want.Hidden {
		if !sameBits(got.Hidden[i], want.Hidden[i]) {
			t.Fatalf("%s: the residual stream after layer %d differs", what, i)
		}
	}
	if !sameBits(got.Logits, want.Logits) {
		t.Fatalf("%s: the logits differ", what)
	}
}

// TestRunsKeepArithmetic: the runs a pass splits its work into, so that it
// can stop between them, leave every row's arithmetic as it was. Matrix
// products in runs of 16 and 128 rows give the residual stream and logits
// of one product over all 300 rows, bit for bit, on the exact and the fast
// path (16 is the smallest run that keeps the exact path's packed kernel,
// packMinTokens 12; 128 leaves a tail of 172). On the fast path, whose rows
// are each computed alone, a 300-token pass also equals the same tokens in
// three passes of 100, which checks the DeltaNet's conv and scan runs of
// stopTokens (256) tokens against single runs. A stop that never says yes
// changes nothing.
func TestRunsKeepArithmetic(t *testing.T) {
	ids := stopPrompt(300)
	for _, precision := range []Precision{PrecisionExact, PrecisionFast} {
		t.Run(string(precision), func(t *testing.T) {
			b, w := openModel(t, fixtures.Demo(t), Options{Precision: precision})
			whole, _, err := stopPass(t, b, w, ids, 1<<30, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, rows := range []int{16, 0} {
				var calls atomic.Int64
				got, _, err := stopPass(t, b, w, ids, rows, func() bool { calls.Add(1); return false })
				if err != nil {
					t.Fatal(err)
				}
				sameResult(t, "runs against one product", got, whole)
				if calls.Load() == 0 {
					t.Fatal("the stop function was never asked")
				}
			}
			if precision != PrecisionFast {
				return
			}
			seq, err := b.NewSequence(len(ids))
			if err != nil {
				t.Fatal(err)
			}
			var hidden [][]float32
			var last model.Result
			for _, piece := range [][2]int{{0, 100}, {100, 200}, {200, 300}} {
				res, err := model.Run(b, w, seq, model.Input{IDs: ids[piece[0]:piece[1]], Logits: model.LogitsLast, Hidden: true})
				if err != nil {
					t.Fatal(err)
				}
				if hidden == nil {
					hidden = res.Hidden
				} else {
					for i := 1; i < len(hidden); i++ {
						hidden[i] = append(hidden[i], res.Hidden[i]...)
					}
					hidden[0] = append(hidden[0], res.Hidden[0]...)
				}
				last = res
			}
			sameResult(t, "one pass against three", whole, model.Result{Hidden: hidden, Logits: last.Logits})
		})
	}
}

// cpuTime is the CPU time of the whole process: the pass's threads and
// nothing of the other programs that share the machine.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

func processCPUTime(t *testing.T) time.Duration {
	d, err := cpuTime()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStopBoundsWork stops a pass of the demo model's first three layers
// (two DeltaNet layers and an attention layer) inside its blocks at
// several prompt lengths (500, 2000 and 8000 tokens; 300 and 1200 with the
// race detector, 500 and 2000 with -short) and measures the CPU time the
// process spends after the stop function first says yes: the work still
// under way on each thread, then the remaining blocks returning at once.
// The stop says yes from a fifth, two fifths and three fifths of the
// whole pass's CPU time on (a watcher sets it, wherever the pass is then).
// Bound, at n tokens: a tenth of the whole pass's CPU time at the shortest
// length, plus 5 ms for scheduling and cache noise, plus 6 ms per 1000
// tokens (60 ms under the race detector). The runs between checks do not
// grow with the tokens (at most 255 rows of one matrix, one attention
// block, 256 tokens of one head's scan), but the bookkeeping between two
// checks does: allocating and zeroing the pass's buffers, building the
// attention blocks' lists, the MoE's map of rows and quantizing them once
// for the experts, the conv's window. The longest process CPU time between
// two consecutive checks of the six-layer pass measured 5–6 ms at 500
// tokens, 5–12 ms at 2000 and 33–48 ms at 8000. A stretch without a check
// over a whole block, as before the checks inside the blocks, takes
// seconds at 8000 tokens (a layer's attention) and fails the bound. And the
// checks keep pace with the tokens: a pass asks stop at least 0.9 times as
// often per token at the longest prompt as at the shortest (the matrix
// products alone ask once per stopRows rows).
func TestStopBoundsWork(t *testing.T) {
	lengths := []int{500, 2000, 8000}
	switch {
	case raceEnabled:
		lengths = []int{300, 1200}
	case testing.Short():
		lengths = lengths[:2]
	}
	b, six := openModel(t, fixtures.Demo(t), Options{})
	// The first three layers (DeltaNet, DeltaNet, attention) have every
	// kind of block at half the time of the six.
	w := *six
	w.Layers = six.Layers[:3]
	type measure struct {
		tokens int
		checks int64
		whole  time.Duration   // CPU time of the pass run to its end
		after  []time.Duration // CPU time after the stop, per stop point
	}
	var ms []measure
	for _, n := range lengths {
		ids := stopPrompt(n)
		m := measure{tokens: n}
		var calls atomic.Int64
		start := processCPUTime(t)
		if _, _, err := stopPass(t, b, &w, ids, 0, func() bool { calls.Add(1); return false }); err != nil {
			t.Fatal(err)
		}
		m.whole = processCPUTime(t) - start
		m.checks = calls.Load()
		for _, frac := range []int64{1, 2, 3} {
			// The stop says yes from a point in the pass's CPU time on,
			// wherever the pass is then: in a run between checks or not.
			var flag atomic.Bool
			fired := make(chan time.Duration, 1)
			done := make(chan struct{})
			start := processCPUTime(t)
			go func() {
				target := start + m.whole*time.Duration(frac)/5
				for {
					select {
					case <-done:
						return
					default:
					}
					if now, err := cpuTime(); err == nil && now >= target {
						flag.Store(true)
						fired <- now
						return
					}
					time.Sleep(200 * time.Microsecond) // waits for CPU time to pass: the clock under test
				}
			}()
			_, seq, err := stopPass(t, b, &w, ids, 0, flag.Load)
			end := processCPUTime(t)
			close(done)
			if err == nil {
				t.Logf("%d tokens: the pass ended before %d/5 of its CPU time", n, frac)
				continue
			}
			if !errors.Is(err, model.ErrStopped) {
				t.Fatalf("%d tokens: a stopped pass returned %v, want model.ErrStopped", n, err)
			}
			if _, err := b.Begin([]model.Segment{{Seq: seq, In: model.Input{IDs: ids[:1]}}}); err == nil {
				t.Fatalf("%d tokens: a stopped pass left its sequence usable without a restore", n)
			}
			m.after = append(m.after, end-<-fired)
		}
		if len(m.after) == 0 {
			t.Fatalf("%d tokens: no pass was stopped", n)
		}
		t.Logf("%5d tokens: %6d checks, pass %v CPU; after a stop at 1/5, 2/5, 3/5 of its CPU time: %v CPU",
			n, m.checks, m.whole.Round(time.Millisecond), m.after)
		ms = append(ms, m)
	}
	first, last := ms[0], ms[len(ms)-1]
	perThousand := 6 * time.Millisecond
	if raceEnabled {
		perThousand *= 10
	}
	for _, m := range ms {
		bound := first.whole/10 + 5*time.Millisecond + perThousand*time.Duration(m.tokens)/1000
		if worst := slices.Max(m.after); worst > bound {
			t.Errorf("%d tokens: %v of CPU after a stop, more than %v (a tenth of the %d-token pass, plus 5 ms, plus %v per 1000 tokens)",
				m.tokens, worst, bound, first.tokens, perThousand)
		}
	}
	perToken := func(m measure) float64 { return float64(m.checks) / float64(m.tokens) }
	if perToken(last) < 0.9*perToken(first) {
		t.Errorf("checks per token fall with the prompt: %.2f at %d tokens, %.2f at %d",
			perToken(last), last.tokens, perToken(first), first.tokens)
	}
	var all []time.Duration
	for _, m := range ms {
		all = append(all, m.after...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	t.Logf("CPU time after a stop over all lengths: median %v, min %v, max %v", all[len(all)/2], all[0], all[len(all)-1])
}

// BenchmarkPrefillRuns measures what splitting a pass's matrix products
// into runs of stopRows rows costs: a 512-token pass of the full-size
// two-layer benchmark checkpoint (see BenchmarkPrefill512) in runs of
// stopRows and in one product per matrix, alternating pass by pass so
// that both see the same load (after one pass of each to page the weights
// in). It reports each one's median time per pass and the ratio of the
// medians.
func BenchmarkPrefillRuns(b *testing.B) {
	for _, precision := range []Precision{PrecisionFast, PrecisionExact} {
		b.Run(string(precision), func(b *testing.B) {
			be, w := benchSetupWith(b, Options{Precision: precision})
			prompt := benchPrompt(512)
			pass := func(rows int) time.Duration {
				start := time.Now()
				seq, err := be.NewSequence(len(prompt))
				if err != nil {
					b.Fatal(err)
				}
				segs := []model.Segment{{Seq: seq, In: model.Input{IDs: prompt, Logits: model.LogitsLast}}}
				p, err := be.Begin(segs)
				if err != nil {
					b.Fatal(err)
				}
				p.(*pass).blockRows = rows
				model.Forward(p, w, segs)
				p.Submit()
				if _, err := p.Wait(); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			pass(stopRows)
			pass(1 << 30)
			var runs, whole []time.Duration
			b.ResetTimer()
			for range b.N {
				runs = append(runs, pass(stopRows))
				whole = append(whole, pass(1<<30))
			}
			median := func(d []time.Duration) time.Duration {
				slices.Sort(d)
				return d[len(d)/2]
			}
			mr, mw := median(runs), median(whole)
			b.ReportMetric(float64(mr.Milliseconds()), "runs-ms/pass")
			b.ReportMetric(float64(mw.Milliseconds()), "whole-ms/pass")
			b.ReportMetric(float64(mr)/float64(mw), "runs/whole")
			b.Logf("runs of %d rows: %v (%v–%v); one product: %v (%v–%v)", stopRows,
				mr, slices.Min(runs), slices.Max(runs), mw, slices.Min(whole), slices.Max(whole))
		})
	}
}
