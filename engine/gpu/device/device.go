// Package device is the thin line between the GPU backend and a GPU: the
// backend above it chooses kernels, grid sizes and buffer layouts once, and
// two devices implement it below — metal (Apple GPUs through purego and the
// Objective-C runtime, darwin only) and emu (the host emulator, which runs
// the same MSL compiled as C++ on CPU threads).
package device

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
	// NewCommandBuffer starts recording work.
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

// CommandBuffer records dispatches; nothing runs before Commit.
type CommandBuffer interface {
	// Dispatch records one kernel launch. Dispatches recorded after a
	// Barrier see every write of the dispatches before it.
	Dispatch(d Dispatch)
	// Barrier orders the dispatches before it before the ones after it.
	Barrier()
	// Commit submits the recorded work; it returns at once.
	Commit()
	// Wait blocks until the committed work has finished and returns its
	// error (a command-buffer error on Metal, a kernel fault in emu).
	Wait() error
}
