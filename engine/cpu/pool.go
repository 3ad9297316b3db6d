package cpu

import (
	"sync"
	"sync/atomic"
)

// pool runs loops in parallel on a fixed number of goroutines.
type pool struct {
	threads int
}

// parallelFor calls fn(lo, hi) over [0, n) in pieces of at least grain
// items. Pieces are handed out from a shared counter rather than split
// evenly up front: the machine is shared, and a statically split loop waits
// for its slowest thread.
func (p *pool) parallelFor(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	// About four pieces per thread keeps the counter cheap and the tail short.
	piece := (n + 4*p.threads - 1) / (4 * p.threads)
	if piece < grain {
		piece = grain
	}
	pieces := (n + piece - 1) / piece
	workers := min(p.threads, pieces)
	if workers <= 1 {
		fn(0, n)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= pieces {
				return
			}
			lo := i * piece
			fn(lo, min(lo+piece, n))
		}
	}
	wg.Add(workers - 1)
	for range workers - 1 {
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}
