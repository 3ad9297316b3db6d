package bench

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
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

// MeasureDeviceCopy copies a buffer of size bytes into another on a GPU
// device with the copy_f32 kernel, copies times, each in its own command
// buffer timed from creation to the end of Wait, and reports the
// read+write rate of the best copy. A first copy is run untimed (pipeline
// creation, first touch of the pages). It also checks that the copy is
// right, so the rate is that of real work.
func MeasureDeviceCopy(dev device.Device, size int64, copies int) (Bandwidth, error) {
	const threads = 256
	if copies < 1 {
		copies = 1
	}
	n := int(size / 4)
	size = int64(4 * n)
	if n == 0 {
		return Bandwidth{}, fmt.Errorf("bench: device copy of %d bytes: too small", size)
	}
	pipe, err := dev.Pipeline("copy_f32")
	if err != nil {
		return Bandwidth{}, err
	}
	src, err := dev.NewBuffer(int(size))
	if err != nil {
		return Bandwidth{}, err
	}
	defer src.Release()
	dst, err := dev.NewBuffer(int(size))
	if err != nil {
		return Bandwidth{}, err
	}
	defer dst.Release()
	s := src.Bytes()
	for i := 0; i < len(s); i += 4 {
		binary.LittleEndian.PutUint32(s[i:], uint32(i/4))
	}
	params := binary.LittleEndian.AppendUint32(nil, uint32(n))
	copyOnce := func() (time.Duration, error) {
		start := time.Now()
		cb, err := dev.NewCommandBuffer()
		if err != nil {
			return 0, err
		}
		cb.Dispatch(device.Dispatch{
			Pipeline:     pipe,
			Threadgroups: device.Size3{X: (n + threads - 1) / threads, Y: 1, Z: 1},
			Threads:      device.Size3{X: threads, Y: 1, Z: 1},
			Args: []device.Arg{
				{Index: 0, Bytes: params},
				{Index: 1, Buffer: src},
				{Index: 2, Buffer: dst},
			},
			ReadBytes: size, WriteBytes: size,
		})
		cb.Commit()
		err = cb.Wait()
		return time.Since(start), err
	}
	if _, err := copyOnce(); err != nil {
		return Bandwidth{}, err
	}
	d := dst.Bytes()
	for _, i := range []int{0, n / 2, n - 1} {
		if got := binary.LittleEndian.Uint32(d[4*i:]); got != uint32(i) {
			return Bandwidth{}, fmt.Errorf("bench: device copy wrote %d at element %d, want %d", got, i, i)
		}
	}
	var rates []float64
	for range copies {
		dt, err := copyOnce()
		if err != nil {
			return Bandwidth{}, err
		}
		rates = append(rates, 2*float64(size)/dt.Seconds()/1e9)
	}
	st := Summarize(rates)
	return Bandwidth{Method: "device copy kernel (copy_f32)", Bytes: size, Copies: copies, GBps: st.Max, Copy: st}, nil
}
