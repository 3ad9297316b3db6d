// Package emu is the emulator device: engine/gpu/device.Device over the host
// emulator in metalkernels/host, which runs the project's MSL kernels,
// compiled as C++, on CPU threads. The GPU backend above the device
// interface runs unchanged on it, so CI exercises the whole GPU pipeline —
// kernels, grid sizes, buffer layouts, command-buffer structure — without a
// Mac.
//
// Buffers are page-backed memory outside Go's heap (so their addresses never
// move), each ending at a guard page. Command buffers record dispatches and
// run, in commit order, on one queue goroutine per device, like a Metal
// command queue; a dispatch runs to completion before the next starts, so
// every Barrier is already honoured (they are recorded, and counted, but
// need no work). Like the Metal device, it records one command buffer at a
// time and checks each dispatch against Metal's argument limits
// (device.Dispatch.Validate) as it is recorded, so that Linux CI catches a
// command buffer left recording or an argument Metal would refuse. A kernel fault — a deadlocked barrier, threadgroup memory
// over 32 KiB, a bad argument binding — stops its command buffer and comes
// back from Wait.
package emu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/metalkernels"
	"github.com/suzuran-app/suzuran/metalkernels/host"
)

// Options configure New. The zero value compiles the embedded kernels and
// runs fibers in thread order.
type Options struct {
	// Sources are the kernel sources by file name; nil means
	// metalkernels.Sources().
	Sources map[string]string
	// Seed shuffles the fiber order inside every threadgroup (0: thread
	// order). Running a test under two seeds and comparing bits finds
	// missing barriers.
	Seed uint64
	// Threads is the number of OS threads a dispatch uses (0: all CPUs).
	Threads int
	// MaxBufferLength caps buffers (0: 4 GiB), so that the backend's
	// splitting of large weights can be exercised with small limits.
	MaxBufferLength int
	// CacheDir overrides the emulator's build cache.
	CacheDir string
}

// Device is the emulator device.
type Device struct {
	lib     *host.Library
	seed    uint64
	threads int
	maxLen  int

	mu        sync.Mutex
	pipelines map[string]*pipeline
	queue     chan *commandBuffer
	recording bool // a command buffer is between NewCommandBuffer and Commit or Discard
	closed    bool
	done      chan struct{}
}

var _ device.Device = (*Device)(nil)

// New compiles the kernels (or loads them from the build cache) and opens
// the device.
func New(opts Options) (*Device, error) {
	src := opts.Sources
	prefix := ""
	if src == nil {
		src = metalkernels.Sources()
		prefix = "metalkernels/"
	}
	lib, err := host.Compile(src, host.Options{CacheDir: opts.CacheDir, Threads: opts.Threads, PathPrefix: prefix})
	if err != nil {
		return nil, err
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	maxLen := opts.MaxBufferLength
	if maxLen <= 0 {
		maxLen = 4 << 30
	}
	d := &Device{lib: lib, seed: opts.Seed, threads: threads, maxLen: maxLen,
		pipelines: map[string]*pipeline{}, queue: make(chan *commandBuffer, 256), done: make(chan struct{})}
	go d.run()
	return d, nil
}

// Name says "emu: N threads".
func (d *Device) Name() string { return fmt.Sprintf("emu: %d threads", d.threads) }

// MaxBufferLength is Options.MaxBufferLength (4 GiB by default).
func (d *Device) MaxBufferLength() int { return d.maxLen }

// NewBuffer allocates zeroed, guard-paged memory.
func (d *Device) NewBuffer(length int) (device.Buffer, error) {
	if length < 0 || length > d.maxLen {
		return nil, fmt.Errorf("emu: buffer of %d bytes: must be 0 to %d (MaxBufferLength)", length, d.maxLen)
	}
	m, err := host.Alloc(length)
	if err != nil {
		return nil, err
	}
	return &buffer{mem: m, data: m.Bytes()}, nil
}

// WrapPageSize is the alignment WrapBytes demands of a region's start and
// length: Apple Silicon's 16 KiB page, which newBufferWithBytesNoCopy
// demands on every Mac Suzuran runs on.
const WrapPageSize = 16 << 10

// WrapBytes makes a buffer over b without copying. b must stay alive and
// unmoved while the device uses it (a mapped file region). It refuses what
// Metal's newBufferWithBytesNoCopy refuses on Apple Silicon — a region that
// does not start on a 16 KiB page or does not span whole pages — so that a
// layout of wrapped weights the emulator accepts is one a Mac accepts too.
func (d *Device) WrapBytes(b []byte) (device.Buffer, error) {
	if len(b) == 0 {
		return nil, errors.New("emu: WrapBytes of an empty slice")
	}
	if addr := uintptr(unsafe.Pointer(unsafe.SliceData(b))); addr%WrapPageSize != 0 {
		return nil, fmt.Errorf("emu: WrapBytes: memory at %#x is not aligned to the %d-byte page Metal needs; wrap a region that starts on a page boundary, or copy the data into a NewBuffer", addr, WrapPageSize)
	}
	if len(b)%WrapPageSize != 0 {
		return nil, fmt.Errorf("emu: WrapBytes: length %d is not a multiple of the %d-byte page Metal needs; round the region up to whole pages", len(b), WrapPageSize)
	}
	if len(b) > d.maxLen {
		return nil, fmt.Errorf("emu: wrapping %d bytes: over MaxBufferLength %d; split the region", len(b), d.maxLen)
	}
	return &buffer{data: b}, nil
}

// Pipeline returns the kernel with this host name.
func (d *Device) Pipeline(name string) (device.Pipeline, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.pipelines[name]; ok {
		return p, nil
	}
	k, err := d.lib.Kernel(name)
	if err != nil {
		return nil, err
	}
	p := &pipeline{k: k}
	d.pipelines[name] = p
	return p, nil
}

// NewCommandBuffer starts recording. As on Metal, only one command buffer
// is recorded at a time.
func (d *Device) NewCommandBuffer() (device.CommandBuffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("emu: device is closed")
	}
	if d.recording {
		return nil, errors.New("emu: NewCommandBuffer while another command buffer is being recorded; Commit or Discard it first")
	}
	d.recording = true
	return &commandBuffer{dev: d, done: make(chan struct{})}, nil
}

// Close stops the queue after the committed work has run. Buffers stay
// valid until released. It fails while a command buffer is being recorded,
// as Metal's does.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	if d.recording {
		d.mu.Unlock()
		return errors.New("emu: Close while a command buffer is being recorded; Commit or Discard it first")
	}
	d.closed = true
	close(d.queue)
	d.mu.Unlock()
	<-d.done
	return nil
}

// run is the device's queue: command buffers execute one after another in
// commit order.
func (d *Device) run() {
	defer close(d.done)
	for cb := range d.queue {
		cb.err = cb.execute()
		close(cb.done)
	}
}

type buffer struct {
	mem      *host.Memory // nil for wrapped memory
	data     []byte
	released bool
}

func (b *buffer) Bytes() []byte { return b.data }
func (b *buffer) Len() int      { return len(b.data) }

// Release frees memory the device allocated; wrapped memory belongs to the
// caller and is left alone.
func (b *buffer) Release() {
	if b.released {
		return
	}
	b.released = true
	if b.mem != nil {
		b.mem.Free()
	}
	b.data = nil
}

type pipeline struct{ k *host.Kernel }

func (p *pipeline) Name() string { return p.k.Name() }

// MaxThreadsPerThreadgroup is the kernel's
// [[max_total_threads_per_threadgroup(n)]], else Metal's 1024; a real
// pipeline may allow fewer on a Mac (a register-heavy kernel), which only a
// Mac can tell.
func (p *pipeline) MaxThreadsPerThreadgroup() int { return p.k.MaxThreadsPerThreadgroup() }
func (p *pipeline) ThreadExecutionWidth() int     { return 32 }

type commandBuffer struct {
	dev        *Device
	dispatches []device.Dispatch
	barriers   int
	committed  bool // Commit or Discard was called
	recordErr  error
	done       chan struct{}
	err        error
}

// Dispatch records a launch. Constant data (Arg.Bytes) is copied now, as
// Metal's setBytes does, so the caller may reuse its slice. A dispatch that
// breaks Metal's limits is not recorded: the command buffer then runs
// nothing and Wait returns the reason, as on Metal.
func (c *commandBuffer) Dispatch(d device.Dispatch) {
	if c.committed {
		// Metal asserts on this too; the queue may already be running it.
		panic("emu: Dispatch on a command buffer that was already committed or discarded")
	}
	if c.recordErr != nil {
		return
	}
	if _, ok := d.Pipeline.(*pipeline); !ok {
		c.recordErr = fmt.Errorf("emu: pipeline %T is not from the emu device", d.Pipeline)
		return
	}
	for _, a := range d.Args {
		if b, ok := a.Buffer.(*buffer); ok && b.released {
			c.recordErr = fmt.Errorf("emu: kernel %s: [[buffer(%d)]]: the buffer was released", d.Pipeline.Name(), a.Index)
			return
		}
	}
	// The kernel's own threadgroup declarations are checked when it runs
	// (the host emulator faults over 32 KiB); here the bound arguments are.
	if err := d.Validate(0, 0); err != nil {
		c.recordErr = fmt.Errorf("emu: %w", err)
		return
	}
	args := make([]device.Arg, len(d.Args))
	copy(args, d.Args)
	for i := range args {
		if args[i].Bytes != nil {
			args[i].Bytes = append([]byte(nil), args[i].Bytes...)
		}
	}
	d.Args = args
	c.dispatches = append(c.dispatches, d)
}

// Barrier is recorded; dispatches already run one at a time in order.
func (c *commandBuffer) Barrier() { c.barriers++ }

// Commit queues the command buffer; it runs after every command buffer
// committed before it. After a recording error nothing is queued.
func (c *commandBuffer) Commit() {
	c.dev.mu.Lock()
	defer c.dev.mu.Unlock()
	if c.committed {
		return
	}
	c.committed = true
	c.dev.recording = false
	switch {
	case c.recordErr != nil:
		c.err = c.recordErr
		close(c.done)
	case c.dev.closed:
		c.err = errors.New("emu: Commit on a closed device")
		close(c.done)
	default:
		c.dev.queue <- c
	}
}

// Discard ends recording without queuing anything.
func (c *commandBuffer) Discard() {
	c.dev.mu.Lock()
	defer c.dev.mu.Unlock()
	if c.committed {
		return
	}
	c.committed = true
	c.dev.recording = false
	c.dispatches = nil
	c.err = c.recordErr
	if c.err == nil {
		c.err = errors.New("emu: the command buffer was discarded, nothing ran")
	}
	close(c.done)
}

// Wait returns the recording error or the first fault of the command
// buffer's dispatches.
func (c *commandBuffer) Wait() error {
	if !c.committed {
		return errors.New("emu: Wait before Commit")
	}
	<-c.done
	return c.err
}

func (c *commandBuffer) execute() error {
	for i, d := range c.dispatches {
		if err := c.dev.dispatch(d); err != nil {
			name := "<nil pipeline>"
			if d.Pipeline != nil {
				name = d.Pipeline.Name()
			}
			return fmt.Errorf("dispatch %d of %d (%s): %w", i+1, len(c.dispatches), name, err)
		}
	}
	return nil
}

func (d *Device) dispatch(ds device.Dispatch) error {
	p, ok := ds.Pipeline.(*pipeline)
	if !ok {
		return fmt.Errorf("emu: pipeline %T is not from the emu device", ds.Pipeline)
	}
	args := make([]host.Arg, 0, len(ds.Args))
	for _, a := range ds.Args {
		switch {
		case a.Buffer != nil:
			b, ok := a.Buffer.(*buffer)
			if !ok {
				return fmt.Errorf("emu: argument %d: buffer %T is not from the emu device", a.Index, a.Buffer)
			}
			if b.released {
				return fmt.Errorf("emu: argument %d: buffer was released", a.Index)
			}
			if a.Offset < 0 || a.Offset > len(b.data) {
				return fmt.Errorf("emu: argument %d: offset %d outside the %d-byte buffer", a.Index, a.Offset, len(b.data))
			}
			args = append(args, host.Arg{Index: a.Index, Buffer: b.data[a.Offset:]})
		case a.Bytes != nil:
			args = append(args, host.Arg{Index: a.Index, Bytes: a.Bytes})
		case a.Threadgroup > 0:
			args = append(args, host.Arg{Index: a.Index, Threadgroup: a.Threadgroup})
		default:
			return fmt.Errorf("emu: argument %d sets none of Buffer, Bytes, Threadgroup", a.Index)
		}
	}
	return p.k.Dispatch(host.Size3(ds.Threadgroups), host.Size3(ds.Threads), args, d.seed)
}
