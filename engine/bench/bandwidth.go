package bench

import (
	"fmt"
	"sync"
	"time"
)

// Bandwidth is what the copy probe measured.
type Bandwidth struct {
	Method string `json:"method"`
	Bytes  int64  `json:"bytes"` // size of the buffer copied
	Copies int    `json:"copies"`
	// GBps counts the bytes read plus the bytes written per second (1e9
	// bytes per GB), the convention of STREAM's Copy, for the best copy.
	GBps float64 `json:"gbps"`
	// Copy is GBps of every copy.
	Copy Stat `json:"copy_gbps"`
}

// MeasureCopy copies a buffer of size bytes into another, copies times,
// split over threads goroutines (one contiguous slice each, so every core's
// memory path is busy), and reports the read+write rate. The buffers are
// written before the first timed copy, so page faults are not timed. The
// memory is returned to the garbage collector afterwards; measure it after
// reading the peak resident memory, which it would otherwise raise.
func MeasureCopy(size int64, copies, threads int) Bandwidth {
	if threads < 1 {
		threads = 1
	}
	if copies < 1 {
		copies = 1
	}
	src := make([]byte, size)
	dst := make([]byte, size)
	parallel(threads, len(src), func(lo, hi int) {
		for i := lo; i < hi; i += 4096 {
			src[i] = byte(i >> 12)
			dst[i] = 1
		}
	})
	var rates []float64
	for range copies {
		start := time.Now()
		parallel(threads, len(src), func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
		rates = append(rates, 2*float64(size)/time.Since(start).Seconds()/1e9)
	}
	st := Summarize(rates)
	return Bandwidth{Method: fmt.Sprintf("host memory copy, %d threads", threads), Bytes: size, Copies: copies, GBps: st.Max, Copy: st}
}

// parallel runs f over n items split into threads contiguous ranges.
func parallel(threads, n int, f func(lo, hi int)) {
	var wg sync.WaitGroup
	per := (n + threads - 1) / threads
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}
