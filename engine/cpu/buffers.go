package cpu

import (
	"math/bits"
	"sync"
)

// The blocks' working buffers (projections, the conv's rows, the scan's
// gates, the experts' inputs, hidden rows and outputs) are recycled
// rather than made on every call: a 512-token prefill would otherwise
// allocate about 200 MB per layer and start the garbage collector every
// few blocks. A block takes them from a blockBuffers, which hands them all
// back when the block returns; a buffer with a shorter life (an expert's
// hidden rows) goes back as soon as it is done with (putFloats). The
// activations a block returns are made as before: their life is the
// model's to decide.

// sizeClass is the class of a buffer of n elements and its capacity:
// four classes per power of two, so that a buffer holds at most a quarter
// more than asked (16 elements at the least). A capacity's own class is
// the class that gave it.
func sizeClass(n int) (class, capacity int) {
	if n <= 16 {
		return 0, 16
	}
	b := bits.Len(uint(n - 1)) // 2^(b−1) < n ≤ 2^b
	base := 1 << (b - 1)
	step := base / 4
	q := (n - base + step - 1) / step // 1 … 4
	return b*4 + q, base + q*step
}

// sizeClasses covers every int's class.
const sizeClasses = 64*4 + 5

// floatPools recycles float32 buffers by size class.
var floatPools [sizeClasses]sync.Pool

// getFloats returns a zeroed buffer of n floats from the pools.
func getFloats(n int) *[]float32 {
	c, size := sizeClass(n)
	if p, ok := floatPools[c].Get().(*[]float32); ok {
		*p = (*p)[:n]
		clear(*p)
		return p
	}
	s := make([]float32, n, size)
	return &s
}

// putFloats hands a buffer from getFloats back to the pools; the caller
// keeps no reference to it.
func putFloats(p *[]float32) {
	if p == nil || cap(*p) == 0 {
		return
	}
	c, _ := sizeClass(cap(*p))
	floatPools[c].Put(p)
}

// blockBuffers hands out one block's working buffers, from any of its
// threads, and takes them all back at release.
type blockBuffers struct {
	mu    sync.Mutex
	taken []*[]float32
}

// floats returns a zeroed buffer of n floats, valid until release.
func (b *blockBuffers) floats(n int) []float32 {
	p := getFloats(n)
	b.mu.Lock()
	b.taken = append(b.taken, p)
	b.mu.Unlock()
	return *p
}

// tensor returns a zeroed [rows, width] tensor valid until release.
func (b *blockBuffers) tensor(rows, width int) *tensor {
	return &tensor{rows: rows, width: width, data: b.floats(rows * width)}
}

// keep adds a buffer of the pools to those release hands back.
func (b *blockBuffers) keep(p *[]float32) {
	b.mu.Lock()
	b.taken = append(b.taken, p)
	b.mu.Unlock()
}

// release hands every buffer back; none may be used after.
func (b *blockBuffers) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.taken {
		putFloats(p)
	}
	b.taken = nil
}

// slicePool recycles a call's scratch buffers of T, whatever their
// length: get hands out one of n elements, not zeroed (a buffer too short
// is replaced), and put takes it back.
type slicePool[T any] struct{ pool sync.Pool }

func (s *slicePool[T]) get(n int) *[]T {
	p, _ := s.pool.Get().(*[]T)
	if p == nil {
		p = new([]T)
	}
	if cap(*p) < n {
		*p = make([]T, n)
	}
	*p = (*p)[:n]
	return p
}

func (s *slicePool[T]) put(p *[]T) { s.pool.Put(p) }

// sumsScratch recycles attention's per-row sums.
var sumsScratch slicePool[float64]

// bytePools recycles byte buffers by size class, as floatPools.
var bytePools [sizeClasses]sync.Pool

// getBytes returns a buffer of n bytes from the pools, not zeroed.
func getBytes(n int) *[]byte {
	c, size := sizeClass(n)
	if p, ok := bytePools[c].Get().(*[]byte); ok {
		*p = (*p)[:n]
		return p
	}
	s := make([]byte, n, size)
	return &s
}

// putBytes hands a buffer from getBytes back to the pools.
func putBytes(p *[]byte) {
	if p == nil || cap(*p) == 0 {
		return
	}
	c, _ := sizeClass(cap(*p))
	bytePools[c].Put(p)
}
