package cuda

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/metalkernels"
)

// Options configure New. The zero value opens GPU 0 with the embedded
// kernels.
type Options struct {
	// Ordinal is the CUDA device number (0: the first GPU).
	Ordinal int
	// Sources are the kernel sources by file name; nil means
	// metalkernels.Sources().
	Sources map[string]string
	// MaxBufferLength caps buffers (0: the GPU's memory).
	MaxBufferLength int
	// Profile times every dispatch with CUDA events (KernelTimes); it
	// costs two events per dispatch.
	Profile bool
	// ProfileFile, when set, turns Profile on and receives the kernel
	// table (WriteKernelTimes) when the device closes.
	ProfileFile string
	// CacheDir holds compiled modules by content hash; "" means
	// $SUZURAN_CUDA_CACHE, else the user cache dir + suzuran/cuda.
	CacheDir string
}

// Device is a CUDA GPU running the project's MSL kernels.
type Device struct {
	a       *api
	ctx     uintptr
	dev     int32
	name    string
	arch    string
	maxLen  int
	profile bool
	profOut string

	mu        sync.Mutex
	pipelines map[string]*pipeline
	funcs     map[string]kernelFunc
	recording bool
	closed    bool
	launch    chan *commandBuffer
	waitq     chan *commandBuffer
	done      chan struct{}
	arenas    [][]uintptr // free constant arenas by size class
	times     map[string]*KernelTime
}

// KernelTime is what profiling measured for one kernel.
type KernelTime struct {
	Name       string
	Dispatches int
	Seconds    float64
	// Bytes is the traffic the dispatches declared (ReadBytes +
	// WriteBytes), for the achieved bandwidth Bytes / Seconds.
	Bytes int64
}

type kernelFunc struct {
	fn         uintptr
	maxThreads int
	static     int // static shared memory bytes
	regs       int
}

var _ device.Device = (*Device)(nil)

// Available says whether a CUDA device can be opened here, and if not why.
func Available() error {
	a, err := loadAPI()
	if err != nil {
		return err
	}
	if err := a.check("cuInit", call(a.cuInit, 0)); err != nil {
		return err
	}
	var n int32
	if err := a.check("cuDeviceGetCount", call(a.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("cuda: the driver sees no CUDA device")
	}
	return nil
}

// New opens the GPU, compiles the kernels with NVRTC (or loads them from
// the cache) and loads them.
func New(opts Options) (*Device, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	a, _ := loadAPI()
	d := &Device{a: a, profile: opts.Profile || opts.ProfileFile != "", profOut: opts.ProfileFile, pipelines: map[string]*pipeline{}, funcs: map[string]kernelFunc{},
		launch: make(chan *commandBuffer, 64), waitq: make(chan *commandBuffer, 64), done: make(chan struct{}),
		times: map[string]*KernelTime{}}
	if err := a.check("cuDeviceGet", call(a.cuDeviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(opts.Ordinal))); err != nil {
		return nil, err
	}
	var nameBuf [256]byte
	call(a.cuDeviceGetName, uintptr(unsafe.Pointer(&nameBuf[0])), 256, uintptr(d.dev))
	d.name = cstring(uintptr(unsafe.Pointer(&nameBuf[0])))
	major, minor := d.attr(cuAttrComputeCapabilityMajor), d.attr(cuAttrComputeCapabilityMinor)
	d.arch = fmt.Sprintf("sm_%d%d", major, minor)
	if d.attr(cuAttrConcurrentManagedAccess) == 0 {
		return nil, fmt.Errorf("cuda: %s cannot share managed memory with the host while kernels run (no concurrent managed access); the cuda device needs it", d.name)
	}
	var total uintptr
	call(a.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(d.dev))
	d.maxLen = int(total)
	if opts.MaxBufferLength > 0 && opts.MaxBufferLength < d.maxLen {
		d.maxLen = opts.MaxBufferLength
	}
	if err := a.check("cuDevicePrimaryCtxRetain", call(a.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev))); err != nil {
		return nil, err
	}
	src := opts.Sources
	prefix := ""
	if src == nil {
		src = metalkernels.Sources()
		prefix = "metalkernels/"
	}
	if err := d.loadKernels(src, prefix, opts.CacheDir); err != nil {
		call(a.cuDevicePrimaryCtxRelease, uintptr(d.dev))
		return nil, err
	}
	ready := make(chan error, 2)
	go d.launcher(ready)
	go d.waiter(ready)
	for range 2 {
		if err := <-ready; err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *Device) attr(a int) int {
	var v int32
	call(d.a.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(d.dev))
	return int(v)
}

// current makes the device's context current on this OS thread, which the
// caller has locked.
func (d *Device) current() error {
	return d.a.check("cuCtxSetCurrent", call(d.a.cuCtxSetCurrent, d.ctx))
}

// modules caches compiled code per process: tests open many devices.
var (
	modMu    sync.Mutex
	modCache = map[string][][]byte{} // by hash of the sources → compiled units
)

func cudaCacheDir(dir string) string {
	if dir != "" {
		return dir
	}
	if d := os.Getenv("SUZURAN_CUDA_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "suzuran", "cuda")
	}
	return ""
}

func (d *Device) loadKernels(src map[string]string, prefix, cacheDir string) error {
	units, headers, err := translate(src, prefix)
	if err != nil {
		return err
	}
	var hparts []string
	var hn []string
	for n := range headers {
		hn = append(hn, n)
	}
	sort.Strings(hn)
	for _, n := range hn {
		hparts = append(hparts, n, headers[n])
	}
	key := hashText(append(append([]string{d.a.nvrtcPath, d.arch}, nvrtcOptions(d.arch)...), hparts...)...)
	for _, u := range units {
		key = hashText(key, u.name, u.text)
	}
	modMu.Lock()
	images, ok := modCache[key]
	modMu.Unlock()
	if !ok {
		images = make([][]byte, len(units))
		dir := cudaCacheDir(cacheDir)
		errs := make([]error, len(units))
		var wg sync.WaitGroup
		sem := make(chan struct{}, max(1, runtime.NumCPU()))
		for i, u := range units {
			ukey := hashText(key, u.name)
			path := ""
			if dir != "" {
				path = filepath.Join(dir, ukey+".bin")
				if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
					images[i] = b
					continue
				}
			}
			wg.Add(1)
			go func(i int, u cudaUnit, path string) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				img, err := d.a.compileUnit(u, headers, d.arch)
				if err != nil {
					errs[i] = err
					return
				}
				images[i] = img
				if path != "" && os.MkdirAll(filepath.Dir(path), 0o755) == nil {
					tmp := fmt.Sprintf("%s.tmp%d", path, os.Getpid())
					if os.WriteFile(tmp, img, 0o644) == nil {
						os.Rename(tmp, path)
					}
				}
			}(i, u, path)
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		modMu.Lock()
		modCache[key] = images
		modMu.Unlock()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.current(); err != nil {
		return err
	}
	for i, u := range units {
		img := append(append([]byte(nil), images[i]...), 0)
		var mod uintptr
		if err := d.a.check("cuModuleLoadData("+u.name+")", call(d.a.cuModuleLoadData, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&img[0])))); err != nil {
			return err
		}
		for _, k := range u.kernels {
			var fn uintptr
			if err := d.a.check("cuModuleGetFunction(cu_k_"+k.Host+")", call(d.a.cuModuleGetFunction, uintptr(unsafe.Pointer(&fn)), mod, uintptr(unsafe.Pointer(cbytes("cu_k_"+k.Host))))); err != nil {
				return err
			}
			kf := kernelFunc{fn: fn, maxThreads: 1024}
			var v int32
			if call(d.a.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), cuFuncAttrMaxThreadsPerBlock, fn) == cuSuccess {
				kf.maxThreads = int(v)
			}
			if k.MaxThreads > 0 && k.MaxThreads < kf.maxThreads {
				kf.maxThreads = k.MaxThreads
			}
			if call(d.a.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), cuFuncAttrSharedSizeBytes, fn) == cuSuccess {
				kf.static = int(v)
			}
			if call(d.a.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), cuFuncAttrNumRegs, fn) == cuSuccess {
				kf.regs = int(v)
			}
			d.funcs[k.Host] = kf
		}
	}
	return nil
}

// Name says "cuda: NVIDIA H200 (sm_90)".
func (d *Device) Name() string { return fmt.Sprintf("cuda: %s (%s)", d.name, d.arch) }

// MaxBufferLength is the GPU's memory, or Options.MaxBufferLength.
func (d *Device) MaxBufferLength() int { return d.maxLen }

// buffer is managed memory: one address for the host and the GPU, which
// the driver migrates on use, so that Bytes is the host's view as on an
// Apple GPU's shared memory.
type buffer struct {
	d        *Device
	ptr      uint64
	data     []byte
	released bool
}

func (b *buffer) Bytes() []byte { return b.data }
func (b *buffer) Len() int      { return len(b.data) }
func (b *buffer) Release() {
	if b.released {
		return
	}
	b.released = true
	if b.ptr != 0 {
		b.d.withContext(func() error { return b.d.a.check("cuMemFree", call(b.d.a.cuMemFree, uintptr(b.ptr))) })
	}
	b.data = nil
}

// withContext runs f on a locked OS thread with the device's context
// current.
func (d *Device) withContext(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.current(); err != nil {
		return err
	}
	return f()
}

// NewBuffer allocates zeroed managed memory. It refuses more than the GPU
// has free: managed memory beyond it would be paged from the host, which
// can stall the GPU.
func (d *Device) NewBuffer(length int) (device.Buffer, error) {
	if length < 0 || length > d.maxLen {
		return nil, fmt.Errorf("cuda: buffer of %d bytes: must be 0 to %d (MaxBufferLength)", length, d.maxLen)
	}
	n := length
	if n == 0 {
		n = 1
	}
	b := &buffer{d: d}
	err := d.withContext(func() error {
		var free, total uintptr
		if err := d.a.check("cuMemGetInfo", call(d.a.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))); err != nil {
			return err
		}
		if uintptr(n)+256<<20 > free {
			return fmt.Errorf("cuda: a buffer of %d bytes does not fit the %d bytes free on %s; use a smaller model or context", n, free, d.name)
		}
		if err := d.a.check("cuMemAllocManaged", call(d.a.cuMemAllocManaged, uintptr(unsafe.Pointer(&b.ptr)), uintptr(n), cuMemAttachGlobal)); err != nil {
			return err
		}
		if err := d.a.check("cuMemsetD8", call(d.a.cuMemsetD8, uintptr(b.ptr), 0, uintptr(n))); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.data = unsafe.Slice((*byte)(unsafe.Add(nil, uintptr(b.ptr))), n)[:length]
	return b, nil
}

// WrapBytes copies b into a new buffer: the GPU cannot read host pages
// (a mapped file) at its own memory's speed, so weights are moved once.
// The copy is taken now; later writes to b are not seen.
func (d *Device) WrapBytes(b []byte) (device.Buffer, error) {
	if len(b) == 0 {
		return nil, errors.New("cuda: WrapBytes of an empty slice")
	}
	buf, err := d.NewBuffer(len(b))
	if err != nil {
		return nil, err
	}
	copyMapped(buf.Bytes(), b)
	return buf, nil
}

// copyMapped copies src into dst page by page, leaving zero each page that
// cannot be read: a wrapped region is rounded out to Apple's 16 KiB pages,
// which on a 4 KiB-page machine can begin before a mapped file or reach
// past its end, where nothing the kernels read lies. It returns the bytes
// copied.
func copyMapped(dst, src []byte) int {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	const page = 4096
	n := 0
	for at := 0; at < len(src); {
		// Page-aligned chunks, so that a fault loses no readable byte.
		addr := uintptr(unsafe.Pointer(&src[at]))
		end := min(len(src), at+int(page-addr%page))
		if copyPage(dst[at:end], src[at:end]) {
			n += end - at
		}
		at = end
	}
	return n
}

func copyPage(dst, src []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			clear(dst)
			ok = false
		}
	}()
	copy(dst, src)
	return true
}

// WrapCopies says that WrapBytes copies: a wrapped buffer does not alias
// the caller's memory, as it does on Metal and emu.
func (d *Device) WrapCopies() bool { return true }

// Pipeline returns the kernel with this host name.
func (d *Device) Pipeline(name string) (device.Pipeline, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.pipelines[name]; ok {
		return p, nil
	}
	f, ok := d.funcs[name]
	if !ok {
		return nil, fmt.Errorf("cuda: no kernel named %q", name)
	}
	p := &pipeline{name: name, f: f}
	d.pipelines[name] = p
	return p, nil
}

type pipeline struct {
	name string
	f    kernelFunc
}

func (p *pipeline) Name() string                  { return p.name }
func (p *pipeline) MaxThreadsPerThreadgroup() int { return p.f.maxThreads }
func (p *pipeline) ThreadExecutionWidth() int     { return 32 }

// NewCommandBuffer starts recording; one at a time, as on Metal.
func (d *Device) NewCommandBuffer() (device.CommandBuffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("cuda: device is closed")
	}
	if d.recording {
		return nil, errors.New("cuda: NewCommandBuffer while another command buffer is being recorded; Commit or Discard it first")
	}
	d.recording = true
	return &commandBuffer{dev: d, done: make(chan struct{})}, nil
}

// Close waits for committed work, then releases the context.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	if d.recording {
		d.mu.Unlock()
		return errors.New("cuda: Close while a command buffer is being recorded; Commit or Discard it first")
	}
	d.closed = true
	close(d.launch)
	d.mu.Unlock()
	<-d.done
	if d.profOut != "" {
		f, err := os.Create(d.profOut)
		if err != nil {
			return err
		}
		d.WriteKernelTimes(f)
		return f.Close()
	}
	return nil
}

// WriteKernelTimes writes the profile as a table: per kernel the
// dispatches, total and mean time, share of all kernel time, and the
// bandwidth of the traffic the dispatches declared.
func (d *Device) WriteKernelTimes(w io.Writer) {
	ts := d.KernelTimes()
	var total float64
	for _, t := range ts {
		total += t.Seconds
	}
	fmt.Fprintf(w, "| kernel | dispatches | total ms | mean µs | share | declared GB/s |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, t := range ts {
		fmt.Fprintf(w, "| %s | %d | %.2f | %.1f | %.1f %% | %.0f |\n", t.Name, t.Dispatches, t.Seconds*1e3,
			t.Seconds/float64(t.Dispatches)*1e6, 100*t.Seconds/total, float64(t.Bytes)/t.Seconds/1e9)
	}
}

// KernelTimes returns what profiling measured so far, slowest first.
func (d *Device) KernelTimes() []KernelTime {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []KernelTime
	for _, t := range d.times {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seconds > out[j].Seconds })
	return out
}

// ResetKernelTimes clears the profile.
func (d *Device) ResetKernelTimes() {
	d.mu.Lock()
	d.times = map[string]*KernelTime{}
	d.mu.Unlock()
}

// argAlign is the alignment of setBytes data in the constant arena.
const argAlign = 256

type launchRec struct {
	fn          uintptr
	grid, block device.Size3
	shared      int
	args        argTable
	name        string
	bytes       int64
	consts      []int // indices whose buf holds an arena offset
	start, end  uintptr
}

// argTable is the shim's emu::Args, by value.
type argTable struct {
	buf   [31]uint64
	tgoff [31]uint32
	_     uint32
}

type commandBuffer struct {
	dev       *Device
	recs      []launchRec
	consts    []byte
	barriers  int
	committed bool
	recordErr error
	done      chan struct{}
	err       error
	event     uintptr
	arena     uintptr
	arenaCls  int
	submitted time.Time
}

// Dispatch records a launch; constant data is copied now.
func (c *commandBuffer) Dispatch(ds device.Dispatch) {
	if c.committed {
		panic("cuda: Dispatch on a command buffer that was already committed or discarded")
	}
	if c.recordErr != nil {
		return
	}
	p, ok := ds.Pipeline.(*pipeline)
	if !ok {
		c.recordErr = fmt.Errorf("cuda: pipeline %T is not from the cuda device", ds.Pipeline)
		return
	}
	if err := ds.Validate(p.f.static, 0); err != nil {
		c.recordErr = fmt.Errorf("cuda: %w", err)
		return
	}
	t := ds.Threads
	g := ds.Threadgroups
	norm := func(s device.Size3) device.Size3 {
		if s.Y == 0 {
			s.Y = 1
		}
		if s.Z == 0 {
			s.Z = 1
		}
		return s
	}
	t, g = norm(t), norm(g)
	if n := t.X * t.Y * t.Z; n <= 0 || n > p.f.maxThreads {
		c.recordErr = fmt.Errorf("cuda: kernel %s: %d threads per threadgroup; the pipeline allows 1 to %d", p.name, n, p.f.maxThreads)
		return
	}
	r := launchRec{fn: p.f.fn, grid: g, block: t, name: p.name, bytes: ds.ReadBytes + ds.WriteBytes}
	tg := 0
	for _, a := range ds.Args {
		switch {
		case a.Buffer != nil:
			b, ok := a.Buffer.(*buffer)
			if !ok {
				c.recordErr = fmt.Errorf("cuda: kernel %s: [[buffer(%d)]]: buffer %T is not from the cuda device", p.name, a.Index, a.Buffer)
				return
			}
			if b.released {
				c.recordErr = fmt.Errorf("cuda: kernel %s: [[buffer(%d)]]: the buffer was released", p.name, a.Index)
				return
			}
			r.args.buf[a.Index] = b.ptr + uint64(a.Offset)
		case a.Bytes != nil:
			off := (len(c.consts) + argAlign - 1) / argAlign * argAlign
			c.consts = append(c.consts, make([]byte, off-len(c.consts))...)
			c.consts = append(c.consts, a.Bytes...)
			r.args.buf[a.Index] = uint64(off)
			r.consts = append(r.consts, a.Index)
		case a.Threadgroup > 0:
			r.args.tgoff[a.Index] = uint32(tg)
			tg += device.RoundThreadgroup(a.Threadgroup)
		}
	}
	r.shared = tg
	c.recs = append(c.recs, r)
}

func (c *commandBuffer) Barrier() { c.barriers++ }

func (c *commandBuffer) Commit() {
	d := c.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.committed {
		return
	}
	c.committed = true
	d.recording = false
	switch {
	case c.recordErr != nil:
		c.err = c.recordErr
		close(c.done)
	case d.closed:
		c.err = errors.New("cuda: Commit on a closed device")
		close(c.done)
	default:
		d.launch <- c
	}
}

func (c *commandBuffer) Discard() {
	d := c.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.committed {
		return
	}
	c.committed = true
	d.recording = false
	c.recs = nil
	c.err = c.recordErr
	if c.err == nil {
		c.err = errors.New("cuda: the command buffer was discarded, nothing ran")
	}
	close(c.done)
}

func (c *commandBuffer) Wait() error {
	if !c.committed {
		return errors.New("cuda: Wait before Commit")
	}
	<-c.done
	return c.err
}

// launcher submits command buffers in commit order on one stream, each
// ending at an event the waiter synchronises on.
func (d *Device) launcher(ready chan<- error) {
	runtime.LockOSThread()
	a := d.a
	var stream uintptr
	err := d.current()
	if err == nil {
		err = a.check("cuStreamCreate", call(a.cuStreamCreate, uintptr(unsafe.Pointer(&stream)), cuStreamNonBlocking))
	}
	ready <- err
	if err != nil {
		close(d.waitq)
		for range d.launch {
		}
		return
	}
	for c := range d.launch {
		c.err = d.submit(c, stream)
		d.waitq <- c
	}
	close(d.waitq)
}

// arenaClass rounds n up to a power of two, at least 64 KiB.
func arenaClass(n int) int {
	c := 0
	for s := 64 << 10; s < n; s <<= 1 {
		c++
	}
	return c
}

func (d *Device) takeArena(cls int) (uintptr, error) {
	d.mu.Lock()
	for len(d.arenas) <= cls {
		d.arenas = append(d.arenas, nil)
	}
	if n := len(d.arenas[cls]); n > 0 {
		p := d.arenas[cls][n-1]
		d.arenas[cls] = d.arenas[cls][:n-1]
		d.mu.Unlock()
		return p, nil
	}
	d.mu.Unlock()
	var p uint64
	err := d.a.check("cuMemAlloc", call(d.a.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr((64<<10)<<cls)))
	return uintptr(p), err
}

func (d *Device) putArena(cls int, p uintptr) {
	d.mu.Lock()
	d.arenas[cls] = append(d.arenas[cls], p)
	d.mu.Unlock()
}

func (d *Device) submit(c *commandBuffer, stream uintptr) error {
	a := d.a
	if len(c.consts) > 0 {
		c.arenaCls = arenaClass(len(c.consts))
		p, err := d.takeArena(c.arenaCls)
		if err != nil {
			return err
		}
		c.arena = p
		if err := a.check("cuMemcpyHtoDAsync", call(a.cuMemcpyHtoDAsync, p, uintptr(unsafe.Pointer(&c.consts[0])), uintptr(len(c.consts)), stream)); err != nil {
			return err
		}
	}
	params := new([1]unsafe.Pointer)
	for i := range c.recs {
		r := &c.recs[i]
		for _, k := range r.consts {
			r.args.buf[k] += uint64(c.arena)
		}
		if d.profile {
			r.start, r.end = d.newEvent(), d.newEvent()
			call(a.cuEventRecord, r.start, stream)
		}
		params[0] = unsafe.Pointer(&r.args)
		res := call(a.cuLaunchKernel, r.fn, uintptr(r.grid.X), uintptr(r.grid.Y), uintptr(r.grid.Z),
			uintptr(r.block.X), uintptr(r.block.Y), uintptr(r.block.Z), uintptr(r.shared), stream,
			uintptr(unsafe.Pointer(params)), 0)
		if err := a.check(fmt.Sprintf("launching dispatch %d of %d (%s, grid %v, threadgroup %v)", i+1, len(c.recs), r.name, r.grid, r.block), res); err != nil {
			return err
		}
		if d.profile {
			call(a.cuEventRecord, r.end, stream)
		}
	}
	c.event = d.newEvent()
	return a.check("cuEventRecord", call(a.cuEventRecord, c.event, stream))
}

func (d *Device) newEvent() uintptr {
	var e uintptr
	call(d.a.cuEventCreate, uintptr(unsafe.Pointer(&e)), cuEventDefault)
	return e
}

// waiter completes command buffers in order.
func (d *Device) waiter(ready chan<- error) {
	runtime.LockOSThread()
	defer close(d.done)
	a := d.a
	ready <- d.current()
	var broken error
	for c := range d.waitq {
		if c.event != 0 {
			err := a.check("running the command buffer", call(a.cuEventSynchronize, c.event))
			if err != nil && c.err == nil {
				c.err = err
			}
			call(a.cuEventDestroy, c.event)
		}
		if c.err != nil && broken == nil && strings.Contains(c.err.Error(), "running") {
			// A kernel fault leaves the context unusable.
			broken = c.err
		} else if broken != nil && c.err == nil {
			c.err = broken
		}
		if d.profile && c.err == nil {
			d.mu.Lock()
			for _, r := range c.recs {
				var ms float32
				if call(a.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), r.start, r.end) == cuSuccess {
					t := d.times[r.name]
					if t == nil {
						t = &KernelTime{Name: r.name}
						d.times[r.name] = t
					}
					t.Dispatches++
					t.Seconds += float64(ms) / 1e3
					t.Bytes += r.bytes
				}
			}
			d.mu.Unlock()
		}
		if d.profile {
			for _, r := range c.recs {
				call(a.cuEventDestroy, r.start)
				call(a.cuEventDestroy, r.end)
			}
		}
		if c.arena != 0 {
			d.putArena(c.arenaCls, c.arena)
		}
		c.recs = nil
		close(c.done)
	}
}

// CopyBandwidth measures device-to-device copy bandwidth: bytes read plus
// bytes written per second, copying n bytes reps times after a warm-up.
func (d *Device) CopyBandwidth(n, reps int) (float64, error) {
	var bw float64
	err := d.withContext(func() error {
		a := d.a
		var src, dst uint64
		if err := a.check("cuMemAlloc", call(a.cuMemAlloc, uintptr(unsafe.Pointer(&src)), uintptr(n))); err != nil {
			return err
		}
		defer call(a.cuMemFree, uintptr(src))
		if err := a.check("cuMemAlloc", call(a.cuMemAlloc, uintptr(unsafe.Pointer(&dst)), uintptr(n))); err != nil {
			return err
		}
		defer call(a.cuMemFree, uintptr(dst))
		var stream uintptr
		if err := a.check("cuStreamCreate", call(a.cuStreamCreate, uintptr(unsafe.Pointer(&stream)), cuStreamNonBlocking)); err != nil {
			return err
		}
		defer call(a.cuStreamDestroy, stream)
		call(a.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), stream)
		e0, e1 := d.newEvent(), d.newEvent()
		defer call(a.cuEventDestroy, e0)
		defer call(a.cuEventDestroy, e1)
		call(a.cuEventRecord, e0, stream)
		for range reps {
			if err := a.check("cuMemcpyDtoDAsync", call(a.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), stream)); err != nil {
				return err
			}
		}
		call(a.cuEventRecord, e1, stream)
		if err := a.check("cuEventSynchronize", call(a.cuEventSynchronize, e1)); err != nil {
			return err
		}
		var ms float32
		if err := a.check("cuEventElapsedTime", call(a.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), e0, e1)); err != nil {
			return err
		}
		bw = 2 * float64(n) * float64(reps) / (float64(ms) / 1e3)
		return nil
	})
	return bw, err
}
