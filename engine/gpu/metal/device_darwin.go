//go:build darwin

package metal

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/metalkernels"
)

// Device is one Metal GPU with its command queue, compiled library and
// pipeline cache. It is used by one goroutine at a time (the engine's).
type Device struct {
	dev      objc.ID
	queue    objc.ID
	name     string
	maxBuf   int
	pageSize int
	// maxThreadgroup is the threadgroup memory one threadgroup may use
	// (maxThreadgroupMemoryLength: 32 KiB on every Apple Silicon GPU).
	maxThreadgroup int
	sources        map[string]string
	prefix         string // before file names in compiler messages
	// bundled is the precompiled library to load before compiling the
	// sources ("" for none): see BundledLibraryPath.
	bundled string

	mu        sync.Mutex
	libraries []library
	// choice loads the kernels once, from the bundle or the sources; a
	// failure is remembered: neither can change.
	choice    libraryChoice
	pipelines map[string]*pipeline
	recording bool // a command buffer is between NewCommandBuffer and Commit
	closed    bool
}

var _ device.Device = (*Device)(nil)

// library is one compiled translation unit.
type library struct {
	file string
	id   objc.ID
}

// ErrNoDevice is matched by NewDefault's error when the system has no Metal
// device at all (a virtual machine without a GPU, a CI host).
var ErrNoDevice = errors.New("no Metal device found")

// NewDefault opens the system's default Metal device with the kernels
// embedded in the binary (metalkernels): the app bundle's precompiled
// library of those sources when it has one and it loads, else the sources
// compiled on first use (see Library).
func NewDefault() (*Device, error) {
	sources := metalkernels.Sources()
	d, err := newDevice(sources, "metalkernels/")
	if err != nil {
		return nil, err
	}
	d.bundled = bundledLibraryFor(sources)
	return d, nil
}

// New opens the system's default Metal device. sources maps file names to
// MSL text — the .metal files and the headers they include; they are
// compiled on the first Pipeline call.
func New(sources map[string]string) (*Device, error) { return newDevice(sources, "") }

func newDevice(sources map[string]string, pathPrefix string) (*Device, error) {
	if err := loadSymbols(); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := newPool()
	defer drainPool(pool)

	r, _, _ := purego.SyscallN(symbols.createSystemDefaultDevice)
	dev := objc.ID(r)
	if dev == 0 {
		// Without a window-server session the default device can be nil
		// while the GPU is listed; take the first listed device then.
		arr, _, _ := purego.SyscallN(symbols.copyAllDevices)
		if arr != 0 {
			if send(objc.ID(arr), selCount) > 0 {
				dev = sendID(objc.ID(arr), selObjectAtIndex, 0)
				send(dev, selRetain)
			}
			send(objc.ID(arr), selRelease)
		}
	}
	if dev == 0 {
		return nil, fmt.Errorf("metal: %w (MTLCreateSystemDefaultDevice and MTLCopyAllDevices returned none); use --backend cpu on this machine", ErrNoDevice)
	}
	d := &Device{
		dev:            dev,
		name:           "metal: " + goString(sendID(dev, selName)),
		maxBuf:         int(send(dev, selMaxBufferLength)),
		maxThreadgroup: int(send(dev, selMaxThreadgroupMemoryLength)),
		pageSize:       os.Getpagesize(),
		sources:        sources,
		prefix:         pathPrefix,
		pipelines:      map[string]*pipeline{},
	}
	d.queue = sendID(dev, selNewCommandQueue)
	if d.queue == 0 {
		send(dev, selRelease)
		return nil, fmt.Errorf("metal: %s: newCommandQueue returned nil", d.name)
	}
	return d, nil
}

// Name says which GPU this is, for example "metal: Apple M4 Max".
func (d *Device) Name() string { return d.name }

// MaxBufferLength is the device's maxBufferLength: the backend splits the
// mapped weights into wrapped regions no longer than this.
func (d *Device) MaxBufferLength() int { return d.maxBuf }

// RecommendedMaxWorkingSetSize is the device's recommendedMaxWorkingSetSize:
// about how many bytes of memory the GPU can use at once without the system
// paging, which the app's machine check compares with a model's size.
func (d *Device) RecommendedMaxWorkingSetSize() int64 {
	return int64(send(d.dev, selRecommendedMaxWorkingSetSize))
}

// PageSize is the alignment WrapBytes needs for both the start and the
// length of the memory it wraps (16 KiB on Apple Silicon).
func (d *Device) PageSize() int { return d.pageSize }

// NewBuffer allocates a zero-filled buffer in shared storage: on Apple
// Silicon host and GPU see the same memory, so Bytes needs no copies.
func (d *Device) NewBuffer(length int) (device.Buffer, error) {
	if length <= 0 {
		return nil, fmt.Errorf("metal: NewBuffer(%d): the length must be positive", length)
	}
	if length > d.maxBuf {
		return nil, fmt.Errorf("metal: NewBuffer(%d): longer than the device's maximum buffer length %d; split the allocation", length, d.maxBuf)
	}
	var buf *buffer
	withPool(func() {
		if b := sendID(d.dev, selNewBufferWithLengthOptions, uintptr(length), resourceStorageModeShared); b != 0 {
			buf = d.newBuffer(b, length, nil)
		}
	})
	if buf == nil {
		return nil, fmt.Errorf("metal: newBufferWithLength:%d failed (out of GPU memory?)", length)
	}
	return buf, nil
}

// WrapBytes makes a buffer over b without copying
// (newBufferWithBytesNoCopy, with no deallocator: the memory stays the
// caller's). Metal requires the region to start on a page boundary and to
// span whole pages; the backend wraps page-aligned slices of the mapped
// checkpoint. b must stay mapped and unmoved until the buffer is released.
func (d *Device) WrapBytes(b []byte) (device.Buffer, error) {
	if len(b) == 0 {
		return nil, errors.New("metal: WrapBytes of an empty slice")
	}
	addr := uintptr(unsafe.Pointer(&b[0]))
	if addr%uintptr(d.pageSize) != 0 {
		return nil, fmt.Errorf("metal: WrapBytes: memory at %#x is not aligned to the %d-byte page; wrap a region that starts on a page boundary (a mapping's start, or an offset that is a multiple of %d)", addr, d.pageSize, d.pageSize)
	}
	if len(b)%d.pageSize != 0 {
		return nil, fmt.Errorf("metal: WrapBytes: length %d is not a multiple of the %d-byte page; round the region up to whole pages of the mapping", len(b), d.pageSize)
	}
	if len(b) > d.maxBuf {
		return nil, fmt.Errorf("metal: WrapBytes: length %d is over the device's maximum buffer length %d; wrap the region in several buffers", len(b), d.maxBuf)
	}
	var buf *buffer
	withPool(func() {
		if id := sendID(d.dev, selNewBufferWithBytesNoCopy, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), resourceStorageModeShared, 0); id != 0 {
			buf = d.newBuffer(id, len(b), b)
		}
	})
	if buf == nil {
		return nil, fmt.Errorf("metal: newBufferWithBytesNoCopy over %d bytes at %#x failed; the region must lie inside one mapping of the file (one VM region)", len(b), addr)
	}
	return buf, nil
}

func (d *Device) newBuffer(b objc.ID, length int, wrapped []byte) *buffer {
	buf := &buffer{dev: d, id: b, length: length, wrapped: wrapped}
	if p := send(b, selContents); p != 0 {
		buf.bytes = unsafe.Slice((*byte)(pointerAt(p)), length)
	}
	return buf
}

// buffer is an MTLBuffer in shared storage.
type buffer struct {
	dev     *Device
	id      objc.ID
	length  int
	bytes   []byte
	wrapped []byte // the wrapped host memory, kept reachable for the buffer's life
}

func (b *buffer) Bytes() []byte { return b.bytes }
func (b *buffer) Len() int      { return b.length }

// Release drops the buffer. Work already committed keeps it alive: command
// buffers retain the buffers they use until they complete.
func (b *buffer) Release() {
	if b.id != 0 {
		withPool(func() { send(b.id, selRelease) })
		b.id = 0
		b.bytes = nil
		b.wrapped = nil
	}
}

// pipeline is one compiled compute kernel.
type pipeline struct {
	dev        *Device
	name       string
	state      objc.ID
	maxThreads int
	simdWidth  int
	// staticThreadgroup is the threadgroup memory the kernel declares
	// itself, which counts against the GPU's limit with what Dispatch binds.
	staticThreadgroup int
}

func (p *pipeline) Name() string                  { return p.name }
func (p *pipeline) MaxThreadsPerThreadgroup() int { return p.maxThreads }
func (p *pipeline) ThreadExecutionWidth() int     { return p.simdWidth }

// Pipeline returns the compute pipeline for the kernel with this host name,
// compiling the library on first use and caching each pipeline.
func (d *Device) Pipeline(name string) (device.Pipeline, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("metal: Pipeline on a closed device")
	}
	if p, ok := d.pipelines[name]; ok {
		return p, nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := newPool()
	defer drainPool(pool)

	if err := d.compileLocked(); err != nil {
		return nil, err
	}
	str := newNSString(name)
	var fn objc.ID
	for _, lib := range d.libraries {
		if fn = sendID(lib.id, selNewFunctionWithName, uintptr(str)); fn != 0 {
			break
		}
	}
	send(str, selRelease)
	if fn == 0 {
		return nil, fmt.Errorf("metal: no kernel named %q in the %s library (%d files); check the kernel's name or its [[host_name(...)]]", name, d.choice.source, len(d.libraries))
	}
	var errObj objc.ID
	state := sendID(d.dev, selNewComputePipelineState, uintptr(fn), uintptr(unsafe.Pointer(&errObj)))
	send(fn, selRelease)
	if state == 0 {
		return nil, fmt.Errorf("metal: building the pipeline for kernel %q: %w", name, nsError(errObj))
	}
	p := &pipeline{
		dev:               d,
		name:              name,
		state:             state,
		maxThreads:        int(send(state, selMaxTotalThreadsPerThreadgroup)),
		simdWidth:         int(send(state, selThreadExecutionWidth)),
		staticThreadgroup: int(send(state, selStaticThreadgroupMemoryLength)),
	}
	if p.simdWidth != simdWidth {
		// Every kernel strides by 32 lanes and reduces with simd_sum over
		// 32: any other width would give wrong results, not an error.
		send(state, selRelease)
		return nil, fmt.Errorf("metal: kernel %q runs %d-lane SIMD groups on %s; the kernels are written for %d", name, p.simdWidth, d.name, simdWidth)
	}
	d.pipelines[name] = p
	return p, nil
}

// compileLocked loads the kernels once: the bundle's precompiled library
// (d.bundled) when it exists and loads, else every .metal file compiled,
// each as its own library, at language version 3.1 so that the kernels run
// on macOS 14 and every Apple Silicon GPU. It runs inside the caller's
// autorelease pool.
func (d *Device) compileLocked() error {
	if d.choice.done {
		return d.choice.err
	}
	// The kernels need SIMD-group reductions and simdgroup matrices, which
	// Apple GPUs have from the Apple7 family (M1) on. Below it — GitHub's
	// hosted macOS runners expose an "Apple Paravirtual device" of the
	// Apple5 family — kernels may build and still compute garbage, so say
	// so here. supportsFamily: returns a BOOL, in the low byte of x0.
	if !d.SupportsKernels() {
		d.choice.done = true
		d.choice.err = fmt.Errorf("metal: %s is not of the Apple7 GPU family (M1) or later, which the kernels need (SIMD-group reductions, simdgroup matrices); run on an Apple silicon Mac rather than a virtual machine, or use --backend cpu", d.name)
		return d.choice.err
	}
	return d.choice.load(d.bundled, d.loadLibraryFileLocked, d.compileSourcesLocked)
}

// compileSourcesLocked compiles every .metal file, each as its own library.
func (d *Device) compileSourcesLocked() error {
	units, err := TranslationUnits(d.sources, d.prefix)
	if err != nil {
		return err
	}
	opts := newCompileOptions()
	defer send(opts, selRelease)
	for _, u := range units {
		lib, _, err := d.compileUnit(opts, u)
		if err != nil {
			d.releaseLibrariesLocked()
			return err
		}
		// Warnings are not errors here; CompileUnits reports them.
		d.libraries = append(d.libraries, library{file: u.Name, id: lib})
	}
	return nil
}

// newCompileOptions makes the +1 retained MTLCompileOptions the kernels are
// compiled with: MSL 3.1, so that they run on macOS 14 and every Apple
// Silicon GPU.
func newCompileOptions() objc.ID {
	opts := sendID(objc.ID(classMTLCompileOptions), selNew)
	send(opts, selSetLanguageVersion, languageVersion3_1)
	return opts
}

// compileUnit compiles one translation unit with newLibraryWithSource and
// returns the +1 retained library and the compiler's warnings, or the
// compiler's log as the error. It runs inside the caller's autorelease pool
// (the NSError is autoreleased).
func (d *Device) compileUnit(opts objc.ID, u Unit) (lib objc.ID, warnings string, err error) {
	src := newNSString(u.Text)
	var errObj objc.ID
	lib = sendID(d.dev, selNewLibraryWithSource, uintptr(src), uintptr(opts), uintptr(unsafe.Pointer(&errObj)))
	send(src, selRelease)
	if lib == 0 {
		// The NSError's description is the compiler's log, with file and
		// line numbers kept by TranslationUnits' #line directives.
		return 0, "", fmt.Errorf("metal: compiling %s%s (MSL 3.1) on %s: %w", d.prefix, u.Name, d.name, nsError(errObj))
	}
	// On success the error object, when set, carries the warnings.
	if w := nsError(errObj); w != nil {
		warnings = w.Error()
	}
	return lib, warnings, nil
}

// CompileResult is what Apple's compiler said about one translation unit.
type CompileResult struct {
	Unit     string // the .metal file
	Err      error  // the compiler's log when the unit does not compile
	Warnings string // the compiler's warnings when it does
}

// CompileUnits compiles every translation unit the device would build —
// the exact source newLibraryWithSource receives — and reports each one,
// building no pipeline. Unlike Pipeline it skips the GPU family check, so
// it runs on any Metal device: a hosted runner's paravirtual GPU checks
// the kernels with Apple's compiler this way, and `suzuran doctor` reports
// every kernel family with the compiler's text. The libraries are released.
func (d *Device) CompileUnits() ([]CompileResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("metal: CompileUnits on a closed device")
	}
	units, err := TranslationUnits(d.sources, d.prefix)
	if err != nil {
		return nil, err
	}
	results := make([]CompileResult, len(units))
	withPool(func() {
		opts := newCompileOptions()
		defer send(opts, selRelease)
		for i, u := range units {
			lib, warnings, err := d.compileUnit(opts, u)
			results[i] = CompileResult{Unit: u.Name, Err: err, Warnings: warnings}
			if lib != 0 {
				send(lib, selRelease)
			}
		}
	})
	return results, nil
}

// SupportsKernels reports whether the GPU is of the Apple7 family (M1) or
// later, which the kernels need.
func (d *Device) SupportsKernels() bool {
	return send(d.dev, selSupportsFamily, gpuFamilyApple7)&0xff != 0
}

// Family names the newest Apple GPU family the device supports ("Apple9"
// on an M3 or M4), or "below Apple1" (a virtual machine's paravirtual GPU
// may support none but the Mac and Common families).
func (d *Device) Family() string {
	for f := gpuFamilyAppleNewest; f >= gpuFamilyApple1; f-- {
		if send(d.dev, selSupportsFamily, uintptr(f))&0xff != 0 {
			return fmt.Sprintf("Apple%d", f-gpuFamilyApple1+1)
		}
	}
	return "below Apple1"
}

func (d *Device) releaseLibrariesLocked() {
	for _, lib := range d.libraries {
		send(lib.id, selRelease)
	}
	d.libraries = nil
}

// Kernels compiles the library if needed and lists every kernel it holds,
// sorted, so that a test can build a pipeline for each one.
func (d *Device) Kernels() ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("metal: Kernels on a closed device")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := newPool()
	defer drainPool(pool)
	if err := d.compileLocked(); err != nil {
		return nil, err
	}
	var names []string
	for _, lib := range d.libraries {
		arr := sendID(lib.id, selFunctionNames) // autoreleased NSArray of NSString
		n := int(send(arr, selCount))
		for i := 0; i < n; i++ {
			names = append(names, goString(sendID(arr, selObjectAtIndex, uintptr(i))))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Close releases the pipelines, the library, the queue and the device.
// Buffers are released by their owners.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	if d.recording {
		return errors.New("metal: Close while a command buffer is being recorded; Commit or Discard it first")
	}
	d.closed = true
	withPool(func() {
		for _, p := range d.pipelines {
			send(p.state, selRelease)
		}
		d.pipelines = nil
		d.releaseLibrariesLocked()
		send(d.queue, selRelease)
		send(d.dev, selRelease)
	})
	return nil
}

// withPool runs fn on a locked OS thread inside its own autorelease pool:
// what Metal autoreleases during fn is freed at once rather than piling up
// in whatever pool the thread has (none, for a goroutine's thread). The
// pool is drained and the thread unlocked even when fn panics.
func withPool(fn func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := newPool()
	defer drainPool(pool)
	fn()
}
