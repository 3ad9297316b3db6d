// Package device is the thin line between the GPU backend and a GPU: the
// backend above it chooses kernels, grid sizes and buffer layouts once, and
// three devices implement it below — metal (Apple GPUs through purego and
// the Objective-C runtime, darwin only), emu (the host emulator, which runs
// the same MSL compiled as C++ on CPU threads) and cuda (NVIDIA GPUs, the
// same MSL through NVRTC, found at run time).
package device

import "fmt"

// Device creates buffers and pipelines and records work into command buffers.
type Device interface {
	// Name says which device this is ("metal: Apple M4 Max", "emu: 2 threads").
	Name() string
	// NewBuffer allocates a zeroed buffer shared between host and device.
	NewBuffer(length int) (Buffer, error)
	// WrapBytes makes a buffer over existing host memory without copying
	// (newBufferWithBytesNoCopy on Metal). b must stay alive and unmoved
	// (a mapped file region); Metal also needs it page-aligned.
	WrapBytes(b []byte) (Buffer, error)
	// MaxBufferLength is the largest buffer the device can make or wrap.
	MaxBufferLength() int
	// Pipeline returns the compiled kernel with this host name, compiling
	// and caching on first use.
	Pipeline(name string) (Pipeline, error)
	// NewCommandBuffer starts recording work. A device records one command
	// buffer at a time (on Metal the recording owns an autorelease pool on a
	// locked OS thread): NewCommandBuffer fails until the one being recorded
	// is committed or discarded, and so does Close.
	NewCommandBuffer() (CommandBuffer, error)
	// Close releases the device's resources.
	Close() error
}

// Buffer is device memory that the host can also read and write.
type Buffer interface {
	// Bytes is the host view of the buffer's contents.
	Bytes() []byte
	Len() int
	Release()
}

// Pipeline is one compiled kernel.
type Pipeline interface {
	Name() string
	// MaxThreadsPerThreadgroup is the pipeline's own limit.
	MaxThreadsPerThreadgroup() int
	// ThreadExecutionWidth is the SIMD-group width (32 on Apple GPUs).
	ThreadExecutionWidth() int
}

// Arg is one kernel argument, bound by its index in [[buffer(n)]] or
// [[threadgroup(n)]].
type Arg struct {
	Index int
	// Exactly one of the following is set.
	Buffer      Buffer // device buffer at Offset
	Offset      int
	Bytes       []byte // small constant data (setBytes), at most 4 KiB
	Threadgroup int    // threadgroup memory length in bytes ([[threadgroup(n)]])
}

// Limits of a compute dispatch on every Apple Silicon GPU (Apple's Metal
// feature set tables, Apple7 and later), which both devices enforce so that
// a dispatch the emulator accepts is one Metal accepts too.
const (
	// MaxArgIndex bounds [[buffer(n)]] and [[threadgroup(n)]]: the argument
	// tables have 31 entries, 0 to 30.
	MaxArgIndex = 30
	// MaxSetBytes is the most constant data one setBytes call takes.
	MaxSetBytes = 4096
	// MaxThreadgroupMemory is the threadgroup memory one threadgroup may
	// use, the kernel's own declarations included.
	MaxThreadgroupMemory = 32 << 10
	// ThreadgroupMemoryAlign is the granularity of threadgroup memory
	// lengths: Metal rounds each [[threadgroup(n)]] length up to it.
	ThreadgroupMemoryAlign = 16
)

// Size3 is a grid or threadgroup size.
type Size3 struct{ X, Y, Z int }

// Dispatch is one kernel launch.
type Dispatch struct {
	Pipeline     Pipeline
	Threadgroups Size3 // number of threadgroups in the grid
	Threads      Size3 // threads per threadgroup
	Args         []Arg
	// ReadBytes and WriteBytes are what the dispatch must read and write by
	// its own declaration, summed into the backend's planned traffic.
	ReadBytes, WriteBytes int64
}

// Validate checks the dispatch's arguments against the limits above before
// anything is encoded: every argument sets exactly one of Buffer, Bytes and
// Threadgroup, its index is 0 to MaxArgIndex, a buffer offset lies inside
// the buffer, constant data is 1 to MaxSetBytes bytes, and the threadgroup
// memory — staticThreadgroup bytes the kernel declares itself plus every
// [[threadgroup(n)]] length rounded up to ThreadgroupMemoryAlign, the last
// length given for an index counting — is at most limit
// (MaxThreadgroupMemory when 0). The error names the kernel and the
// argument.
func (d Dispatch) Validate(staticThreadgroup, limit int) error {
	name := "<nil pipeline>"
	if d.Pipeline != nil {
		name = d.Pipeline.Name()
	}
	if limit <= 0 {
		limit = MaxThreadgroupMemory
	}
	// By index, on the stack: Validate runs for every dispatch of a step.
	var threadgroup [MaxArgIndex + 1]int
	for _, a := range d.Args {
		set := 0
		if a.Buffer != nil {
			set++
		}
		if a.Bytes != nil {
			set++
		}
		if a.Threadgroup != 0 {
			set++
		}
		if set != 1 {
			return fmt.Errorf("kernel %s: argument %d must set exactly one of Buffer, Bytes and Threadgroup (it sets %d)", name, a.Index, set)
		}
		kind := "buffer"
		if a.Threadgroup != 0 {
			kind = "threadgroup"
		}
		if a.Index < 0 || a.Index > MaxArgIndex {
			return fmt.Errorf("kernel %s: [[%s(%d)]]: the index must be 0 to %d, the size of Metal's argument table; pack the arguments into fewer", name, kind, a.Index, MaxArgIndex)
		}
		switch {
		case a.Buffer != nil:
			if n := a.Buffer.Len(); a.Offset < 0 || a.Offset >= n {
				return fmt.Errorf("kernel %s: [[buffer(%d)]]: offset %d outside the %d-byte buffer", name, a.Index, a.Offset, n)
			}
		case a.Bytes != nil:
			if len(a.Bytes) == 0 || len(a.Bytes) > MaxSetBytes {
				return fmt.Errorf("kernel %s: [[buffer(%d)]]: %d bytes of constant data; setBytes takes 1 to %d, put more in a buffer", name, a.Index, len(a.Bytes), MaxSetBytes)
			}
		default:
			if a.Threadgroup < 0 {
				return fmt.Errorf("kernel %s: [[threadgroup(%d)]]: negative length %d", name, a.Index, a.Threadgroup)
			}
			threadgroup[a.Index] = RoundThreadgroup(a.Threadgroup)
		}
	}
	total := staticThreadgroup
	for _, n := range threadgroup {
		total += n
	}
	if total > limit {
		return fmt.Errorf("kernel %s: %d bytes of threadgroup memory (%d declared in the kernel, %d bound), over the GPU's %d; use smaller tiles", name, total, staticThreadgroup, total-staticThreadgroup, limit)
	}
	return nil
}

// RoundThreadgroup rounds a threadgroup memory length up to
// ThreadgroupMemoryAlign, as setThreadgroupMemoryLength needs.
func RoundThreadgroup(n int) int {
	return (n + ThreadgroupMemoryAlign - 1) / ThreadgroupMemoryAlign * ThreadgroupMemoryAlign
}

// CommandBuffer records dispatches; nothing runs before Commit.
type CommandBuffer interface {
	// Dispatch records one kernel launch. Dispatches recorded after a
	// Barrier see every write of the dispatches before it.
	Dispatch(d Dispatch)
	// Barrier orders the dispatches before it before the ones after it.
	Barrier()
	// Commit submits the recorded work; it returns at once. A dispatch
	// that broke the device's rules (see Dispatch.Validate) was not
	// recorded; then nothing is submitted and Wait returns why.
	Commit()
	// Discard ends recording without running anything, releasing what the
	// recording held, so that the next NewCommandBuffer can start. Call it
	// instead of Commit when recording fails — also from a deferred
	// function, so that a panic while recording does not leave the device
	// recording. It must be called from the goroutine that recorded; after
	// Commit it does nothing. Wait then returns an error.
	Discard()
	// Wait blocks until the committed work has finished and returns its
	// error (a recording error, a command-buffer error on Metal, a kernel
	// fault in emu).
	Wait() error
}
