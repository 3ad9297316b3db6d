package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool runs loops in parallel on a fixed number of threads: the calling
// goroutine and threads-1 helpers that live as long as the process and wait
// for work between regions, so a parallel region costs a wake-up, not a
// goroutine start (a decode step of the 2-layer benchmark runs 59).
//
// A wake-up of a parked goroutine took 50–130 µs on a quiet 2-core VM (the
// idle core is woken, then takes the goroutine from the caller's run
// queue), against regions of 0.1–0.6 ms in a decode step: the caller ran
// a sixth to a third of a product region alone. So a helper that finishes
// a region polls for the next one for poolSpin before it parks, and a
// caller that finishes its share polls for its helpers before it blocks
// on them; the gaps between a decode step's regions are a few to a few
// tens of microseconds. Only as many helpers poll at once as there are other
// processors, and a polling thread yields its core to the kernel every
// half microsecond or so, so that polling never keeps a goroutine or
// another process with work from running. (BenchmarkParallelForAfterGap,
// µs a region, parking / polling with Go's yield only / yielding the core
// too: 134 / 71 / 72 at load average 2 on 2 cores, 154 / 209 / 145 with
// the machine oversubscribed at load 5. BenchmarkDecode at load 2: a
// DeltaNet layer 0.81x the wall time with this and the prefetch of
// w4Rows1VNNI, 0.94x with the prefetch alone; BENCHMARKS.md.)
//
// The helpers are shared by every pool of the process (workers below): a
// region hands out pieces from a shared counter, so a helper that arrives
// late, or never because another region holds it, costs nothing but its
// share; the caller always works too and the region ends when its pieces
// are done.
//
// The zero value with threads set works; a pool must not be copied after
// its first region.
type pool struct {
	threads  int
	stats    poolStats
	inFlight atomic.Int64 // regions running; stats count only the outermost
}

// poolStats adds up where a pool's time went, for the benchmarks: wall is
// the time spent inside parallel regions (the outermost, when regions
// nest), busy the time each thread spent in their pieces, summed over
// threads. busy/(wall·threads) is how
// well the threads were used inside the regions; wall against a pass's
// total time is its parallel fraction.
type poolStats struct {
	regions atomic.Int64
	wall    atomic.Int64 // nanoseconds
	busy    atomic.Int64 // nanoseconds
}

// region is one parallelFor call: pieces of piece items of [0, n).
type region struct {
	fn       func(lo, hi int)
	n, piece int
	pieces   int
	// stop, when not nil, is asked before each piece; halted records that
	// it said yes.
	stop   func() bool
	halted atomic.Bool
	next   atomic.Int64
	busy   atomic.Int64
	// state counts the helpers working on the region, with closed set once
	// the caller has finished its own share: a helper that finds it set
	// leaves the region alone, and the last helper out of a closed region
	// signals done.
	state atomic.Int64
	done  chan struct{}
}

const closed = 1 << 40

// work runs pieces of r until none are left.
func (r *region) work() {
	start := time.Now()
	for {
		i := int(r.next.Add(1)) - 1
		if i >= r.pieces {
			break
		}
		if r.stop != nil && (r.halted.Load() || r.stop()) {
			r.halted.Store(true)
			break
		}
		lo := i * r.piece
		r.fn(lo, min(lo+r.piece, r.n))
	}
	r.busy.Add(int64(time.Since(start)))
}

// help is a helper's part: join unless the caller is already done, work,
// and signal the caller if it is waiting for this helper.
func (r *region) help() {
	for {
		s := r.state.Load()
		if s&closed != 0 {
			return
		}
		if r.state.CompareAndSwap(s, s+1) {
			break
		}
	}
	r.work()
	if r.state.Add(-1) == closed {
		r.done <- struct{}{}
	}
}

// poolSpin is how long an idle helper polls for the next region, and a
// caller for its helpers, before parking.
const poolSpin = 100 * time.Microsecond

// spinning counts the helpers polling for a region.
var spinning atomic.Int32

// poll returns the next region posted to queue within poolSpin, or nil
// (at once when enough helpers are polling already).
func poll(queue chan *region) *region {
	if n := spinning.Add(1); int(n) > runtime.GOMAXPROCS(0)-1 {
		spinning.Add(-1)
		return nil
	}
	defer spinning.Add(-1)
	start := time.Now()
	for i := 1; ; i++ {
		select {
		case r := <-queue:
			return r
		default:
		}
		if i%64 == 0 {
			if time.Since(start) > poolSpin {
				return nil
			}
			// Anything else runnable goes first: goroutines, then
			// other threads of the machine.
			runtime.Gosched()
			osYield()
		}
	}
}

// workers is the process's set of helper goroutines, shared by every pool.
// Each waits on queue for a region, helps with it, and waits again.
var workers struct {
	sync.Mutex
	started int
	queue   chan *region
}

// maxHelpers bounds the helpers (and the queue) whatever a pool asks for.
const maxHelpers = 256

// ensureWorkers makes sure at least n helpers exist and returns their queue.
func ensureWorkers(n int) chan *region {
	workers.Lock()
	defer workers.Unlock()
	if workers.queue == nil {
		workers.queue = make(chan *region, maxHelpers)
	}
	for ; workers.started < min(n, maxHelpers); workers.started++ {
		go func(queue chan *region) {
			for r := range queue {
				for ; r != nil; r = poll(queue) {
					r.help()
				}
			}
		}(workers.queue)
	}
	return workers.queue
}

// parallelFor calls fn(lo, hi) over [0, n) in pieces of at least grain
// items. Pieces are handed out from a shared counter rather than split
// evenly up front: the machine is shared, and a statically split loop waits
// for its slowest thread. fn may itself call parallelFor: no thread
// ever waits for a helper that has not started on its region.
func (p *pool) parallelFor(n, grain int, fn func(lo, hi int)) {
	p.stoppable(nil, n, grain, 0, fn)
}

// parallelEach calls fn(i, i+1) for each i in [0, n), handing the items out
// one at a time in index order: for a few items of unequal cost (the MoE's
// experts at a prefill), which the caller orders longest first so that the
// last to start are the shortest.
func (p *pool) parallelEach(n int, fn func(lo, hi int)) {
	p.stoppable(nil, n, 1, 1, fn)
}

// stoppable is the pool's one way to stop a region between its work items:
// parallelFor with pieces of at most most items (0: no bound; 1:
// parallelEach's one at a time), and stop, when not nil, asked by the
// thread that takes a piece before it starts it. Once stop says yes no
// piece starts (the pieces under way finish: at most one a thread), and
// stoppable returns false; so the work left after a stop is bounded by
// the pieces' size, not by n. fn's items need no stop checks of their own.
func (p *pool) stoppable(stop func() bool, n, grain, most int, fn func(lo, hi int)) bool {
	if n <= 0 {
		return true
	}
	if grain < 1 {
		grain = 1
	}
	threads := max(p.threads, 1)
	// About four pieces per thread keeps the counter cheap and the tail short.
	piece := (n + 4*threads - 1) / (4 * threads)
	if piece < grain {
		piece = grain
	}
	if most > 0 && piece > most {
		piece = max(most, grain)
	}
	return p.run(n, piece, stop, fn)
}

// run is a parallel region over [0, n) in pieces of piece items, asking
// stop (if any) before each; false when it said yes.
func (p *pool) run(n, piece int, stop func() bool, fn func(lo, hi int)) bool {
	threads := max(p.threads, 1)
	pieces := (n + piece - 1) / piece
	helpers := min(threads, pieces) - 1
	start := time.Now()
	outermost := p.inFlight.Add(1) == 1
	defer p.inFlight.Add(-1)
	r := &region{fn: fn, n: n, piece: piece, pieces: pieces, stop: stop}
	if helpers > 0 {
		r.done = make(chan struct{}, 1)
		queue := ensureWorkers(helpers)
		for range helpers {
			select {
			case queue <- r:
			default: // the queue is full of other regions' requests: go without
			}
		}
	}
	r.work()
	if helpers > 0 && r.state.Or(closed) != 0 {
		// Helpers are still on their last pieces.
		waited := time.Now()
		for i := 1; r.state.Load() != closed; i++ {
			if i%64 == 0 {
				if time.Since(waited) > poolSpin {
					<-r.done
					break
				}
				osYield()
			}
		}
	}
	if outermost {
		p.stats.regions.Add(1)
		p.stats.wall.Add(int64(time.Since(start)))
		p.stats.busy.Add(r.busy.Load())
	}
	return !r.halted.Load()
}
