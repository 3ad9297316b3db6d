package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestParallelFor checks that every index is visited exactly once, over
// sizes that do not divide into the threads or the grain, with several
// regions running at once from different goroutines on the shared helpers
// (as two backends in one process do), and with regions nested.
func TestParallelFor(t *testing.T) {
	cases := []struct{ n, grain, threads int }{
		{1, 1, 2}, {7, 1, 3}, {7, 16, 3}, {100, 3, 2}, {1000, 1, 8}, {4097, 64, 5}, {33, 1, 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("n%d_grain%d_threads%d", c.n, c.grain, c.threads), func(t *testing.T) {
			p := &pool{threads: c.threads}
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range 50 {
						seen := make([]atomic.Int32, c.n)
						p.parallelFor(c.n, c.grain, func(lo, hi int) {
							if hi-lo < min(c.grain, c.n-lo) {
								t.Errorf("piece [%d, %d) is smaller than the grain %d", lo, hi, c.grain)
							}
							for i := lo; i < hi; i++ {
								seen[i].Add(1)
							}
						})
						for i := range seen {
							if v := seen[i].Load(); v != 1 {
								t.Errorf("goroutine %d round %d: index %d visited %d times", g, round, i, v)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			// Regions overlapping another goroutine's are not counted.
			if u := p.usage(); u.Regions < 1 || u.Regions > 200 || u.Wall <= 0 || u.Busy <= 0 {
				t.Errorf("usage %+v after 200 regions, some at once", u)
			}
		})
	}
	t.Run("nested", func(t *testing.T) {
		p := &pool{threads: 3}
		var total atomic.Int64
		p.parallelFor(10, 1, func(lo, hi int) {
			for range hi - lo {
				p.parallelFor(100, 1, func(lo, hi int) { total.Add(int64(hi - lo)) })
			}
		})
		if total.Load() != 1000 {
			t.Errorf("nested regions visited %d items, want 1000", total.Load())
		}
		if u := p.usage(); u.Regions != 1 {
			t.Errorf("usage counts %d regions, want the outermost only", u.Regions)
		}
	})
}

// TestParallelEach checks that parallelEach hands out every index once,
// one per piece.
func TestParallelEach(t *testing.T) {
	for _, n := range []int{1, 3, 37} {
		p := &pool{threads: 3}
		seen := make([]atomic.Int32, n)
		p.parallelEach(n, func(lo, hi int) {
			if hi != lo+1 {
				t.Errorf("n %d: piece [%d, %d) holds more than one item", n, lo, hi)
			}
			seen[lo].Add(1)
		})
		for i := range seen {
			if v := seen[i].Load(); v != 1 {
				t.Errorf("n %d: index %d visited %d times", n, i, v)
			}
		}
	}
}

// TestParallelForSpawnsNothing checks that regions reuse the helpers: the
// number of goroutines does not grow with the number of regions.
func TestParallelForSpawnsNothing(t *testing.T) {
	p := &pool{threads: 4}
	p.parallelFor(100, 1, func(lo, hi int) {})
	before := runtime.NumGoroutine()
	for range 1000 {
		p.parallelFor(100, 1, func(lo, hi int) {})
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines before 1000 regions, %d after", before, after)
	}
}

// BenchmarkParallelForEmpty measures the cost of one region with nothing in
// it but the hand-off to the helpers and the wait.
func BenchmarkParallelForEmpty(b *testing.B) {
	p := &pool{threads: runtime.GOMAXPROCS(0)}
	for range b.N {
		p.parallelFor(64, 1, func(lo, hi int) {})
	}
}

// BenchmarkParallelForAfterGap measures regions as a decode step runs
// them: 32 pieces of about 4 µs of work each (130 µs on one thread), each
// region after 20 µs of serial work on the calling thread, on two
// threads. It reports the wall time of a region: about half the work when
// the helper joins at once, all of it when the helper wakes too late to
// take a piece.
func BenchmarkParallelForAfterGap(b *testing.B) {
	p := &pool{threads: 2}
	work := func(d time.Duration) {
		for t := time.Now(); time.Since(t) < d; {
		}
	}
	var inside time.Duration
	for range b.N {
		work(20 * time.Microsecond)
		t := time.Now()
		p.parallelFor(32, 1, func(lo, hi int) {
			for range hi - lo {
				work(4 * time.Microsecond)
			}
		})
		inside += time.Since(t)
	}
	b.ReportMetric(float64(inside.Microseconds())/float64(b.N), "µs/region")
}

// TestStoppableStopsBetweenItems: a stop that says yes while an item runs
// is seen before the next item starts, on every thread: after the stop no
// piece begins, the pieces under way (at most one a thread) finish, the
// region reports false, and the stop is asked before each piece. Pieces of
// at most most items hold that many; a region whose stop never says yes
// visits every item once and reports true.
func TestStoppableStopsBetweenItems(t *testing.T) {
	for _, c := range []struct{ n, grain, most, threads int }{
		{40, 1, 1, 1}, {40, 1, 1, 3}, {1000, 4, 16, 3}, {1000, 1, 0, 2},
	} {
		t.Run(fmt.Sprintf("n%d_most%d_threads%d", c.n, c.most, c.threads), func(t *testing.T) {
			p := &pool{threads: c.threads}
			var said atomic.Bool
			var asked, started, startedAfter atomic.Int64
			const stopAt = 3 // the piece during which the stop says yes
			ok := p.stoppable(func() bool { asked.Add(1); return said.Load() }, c.n, c.grain, c.most, func(lo, hi int) {
				if c.most > 0 && hi-lo > max(c.most, c.grain) {
					t.Errorf("piece [%d, %d) holds more than %d items", lo, hi, c.most)
				}
				if said.Load() {
					startedAfter.Add(1)
				}
				if started.Add(1) == stopAt {
					said.Store(true)
				}
			})
			if ok {
				t.Fatal("the region reports that it finished after its stop said yes")
			}
			// A piece whose thread asked the stop before it said yes may
			// start after: one on each other thread at the most, none on
			// one thread.
			if n := startedAfter.Load(); n > int64(c.threads)-1 {
				t.Errorf("%d pieces started after the stop said yes, on %d threads", n, c.threads)
			}
			if n := started.Load(); n > stopAt+int64(c.threads)-1 {
				t.Errorf("%d pieces ran, the stop said yes during piece %d on %d threads", n, stopAt, c.threads)
			}
			if asked.Load() < started.Load() {
				t.Errorf("the stop was asked %d times for %d pieces", asked.Load(), started.Load())
			}

			seen := make([]atomic.Int32, c.n)
			if !p.stoppable(func() bool { return false }, c.n, c.grain, c.most, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
			}) {
				t.Fatal("a region whose stop never said yes reports a stop")
			}
			for i := range seen {
				if v := seen[i].Load(); v != 1 {
					t.Fatalf("index %d visited %d times", i, v)
				}
			}
		})
	}
}
