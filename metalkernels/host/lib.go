package host

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// Size3 is a grid or threadgroup size. Y and Z of zero count as 1.
type Size3 struct{ X, Y, Z int }

func (s Size3) norm() Size3 {
	if s.Y == 0 {
		s.Y = 1
	}
	if s.Z == 0 {
		s.Z = 1
	}
	return s
}

// Arg binds one kernel argument by its [[buffer(n)]] or [[threadgroup(n)]]
// index. Exactly one of Buffer, Bytes and Threadgroup is set.
type Arg struct {
	Index int
	// Buffer is device memory the kernel reads and writes in place. It must
	// not move while the dispatch runs: memory from Alloc or a mapped file,
	// or a Go slice (Go's heap does not move objects).
	Buffer []byte
	// Bytes is small constant data, copied (Metal's setBytes), at most 4 KiB.
	Bytes []byte
	// Threadgroup is the length of a [[threadgroup(n)]] argument in bytes.
	Threadgroup int
}

// Library is a compiled and loaded set of kernels.
type Library struct {
	path     string
	handle   uintptr
	dispatch uintptr
	threads  int
	entries  map[string]entry

	mu    sync.Mutex // one dispatch at a time uses desc and arena
	mem   []byte     // mapped: desc, then the setBytes arena
	desc  *desc
	arena []byte

	kmu     sync.Mutex
	kernels map[string]*Kernel
}

// desc mirrors emu::Desc in shim/emu_runtime.h (static_asserts there check
// the C side; TestDescLayout checks this one).
type desc struct {
	fn       uintptr
	groups   [3]uint32
	threads  [3]uint32
	seed     uint64
	buf      [maxBuffers]uint64
	tglen    [maxBuffers]uint32
	nthreads uint32
	err      [1024]byte
	bufLen   [maxBuffers]uint64
}

const (
	maxBuffers  = 31
	maxSetBytes = 4096
)

var (
	loadMu sync.Mutex
	loaded = map[string]*Library{} // by library path: one dlopen per process
)

// Compile builds sources (file name → text: .metal files and the headers
// they include) into a kernel library, or returns the cached one. Errors
// from the source pass and the compiler name the file and line.
func Compile(sources map[string]string, opts Options) (*Library, error) {
	dir, err := cacheDir(opts)
	if err != nil {
		return nil, err
	}
	cxx, id, err := findCXX(opts)
	if err != nil {
		return nil, err
	}
	shim, shimHash, err := shimFiles()
	if err != nil {
		return nil, err
	}
	b := &build{opts: opts, cxx: cxx, id: id, dir: dir, shim: shim, shimHash: shimHash}
	if err := b.prepare(sources); err != nil {
		return nil, err
	}
	path, err := b.run()
	if err != nil {
		return nil, err
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	loadMu.Lock()
	defer loadMu.Unlock()
	key := fmt.Sprintf("%s#%d", path, threads)
	if l, ok := loaded[key]; ok {
		return l, nil
	}
	l, err := load(path, b.entries, threads)
	if err != nil {
		return nil, err
	}
	loaded[key] = l
	return l, nil
}

func load(path string, entries []entry, threads int) (*Library, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("emu: loading %s: %w (delete it to rebuild)", path, err)
	}
	d, err := purego.Dlsym(h, "emu_dispatch")
	if err != nil {
		return nil, fmt.Errorf("emu: %s has no emu_dispatch: %w", path, err)
	}
	size := int(unsafe.Sizeof(desc{})) + maxBuffers*maxSetBytes
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("emu: mapping dispatch memory: %w", err)
	}
	l := &Library{path: path, handle: h, dispatch: d, threads: threads, entries: map[string]entry{},
		mem: mem, desc: (*desc)(unsafe.Pointer(&mem[0])), arena: mem[unsafe.Sizeof(desc{}):],
		kernels: map[string]*Kernel{}}
	for _, e := range entries {
		l.entries[e.host] = e
	}
	return l, nil
}

// Path is the shared library file.
func (l *Library) Path() string { return l.path }

// Names lists the kernels' host names, sorted.
func (l *Library) Names() []string {
	var n []string
	for k := range l.entries {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Kernel is one kernel of a Library.
type Kernel struct {
	lib     *Library
	name    string
	fn      uintptr
	params  []Param
	minSize [maxBuffers]int64 // -1: not a buffer parameter
	tg      [maxBuffers]bool
	// nsPerGroup estimates one threadgroup's CPU time from past
	// dispatches (guarded by the library's mutex), to run small
	// dispatches on the calling thread alone.
	nsPerGroup float64
	maxThreads int
}

// smallDispatchNs: below this much estimated work a dispatch runs on the
// calling thread; waking pool threads takes tens of microseconds on a busy
// machine.
const smallDispatchNs = 40_000

// Kernel returns the kernel with this host name.
func (l *Library) Kernel(name string) (*Kernel, error) {
	l.kmu.Lock()
	defer l.kmu.Unlock()
	if k, ok := l.kernels[name]; ok {
		return k, nil
	}
	e, ok := l.entries[name]
	if !ok {
		return nil, fmt.Errorf("emu: no kernel named %q (have %s)", name, strings.Join(l.Names(), ", "))
	}
	fn, err := purego.Dlsym(l.handle, "emu_k_"+name)
	if err != nil {
		return nil, fmt.Errorf("emu: kernel %s: %w", name, err)
	}
	ks, err := purego.Dlsym(l.handle, "emu_ks_"+name)
	if err != nil {
		return nil, fmt.Errorf("emu: kernel %s: %w", name, err)
	}
	k := &Kernel{lib: l, name: name, fn: fn, params: e.params, maxThreads: e.maxThreads}
	for i := range k.minSize {
		r, _, _ := purego.SyscallN(ks, uintptr(i))
		k.minSize[i] = int64(r)
	}
	for _, p := range e.params {
		if p.Attr == "threadgroup" {
			k.tg[p.Index] = true
		}
	}
	l.kernels[name] = k
	return k, nil
}

// Name is the kernel's host name.
func (k *Kernel) Name() string { return k.name }

// Params lists the kernel's parameters in declaration order.
func (k *Kernel) Params() []Param { return k.params }

// MaxThreadsPerThreadgroup is the kernel's
// [[max_total_threads_per_threadgroup(n)]], or 1024 without one.
func (k *Kernel) MaxThreadsPerThreadgroup() int {
	if k.maxThreads > 0 {
		return k.maxThreads
	}
	return 1024
}

// Dispatch runs the kernel over groups threadgroups of threads threads each
// and returns when it has finished. seed 0 runs each threadgroup's threads
// in order; any other seed shuffles them at every barrier (and fills
// threadgroup memory with a seed-dependent pattern), for race tests.
func (k *Kernel) Dispatch(groups, threads Size3, args []Arg, seed uint64) error {
	groups, threads = groups.norm(), threads.norm()
	if groups.X < 0 || groups.Y < 0 || groups.Z < 0 {
		return fmt.Errorf("emu: kernel %s: negative grid %v", k.name, groups)
	}
	if threads.X < 1 || threads.Y < 1 || threads.Z < 1 || threads.X*threads.Y*threads.Z > 1024 {
		return fmt.Errorf("emu: kernel %s: %d×%d×%d threads per threadgroup; must be 1 to 1024", k.name, threads.X, threads.Y, threads.Z)
	}
	if n := threads.X * threads.Y * threads.Z; n > k.MaxThreadsPerThreadgroup() {
		return fmt.Errorf("emu: kernel %s: %d threads per threadgroup, over its [[max_total_threads_per_threadgroup(%d)]]", k.name, n, k.maxThreads)
	}
	if uint64(groups.X)*uint64(groups.Y)*uint64(groups.Z) > 1<<40 {
		return fmt.Errorf("emu: kernel %s: grid %v too large", k.name, groups)
	}
	l := k.lib
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.desc
	*d = desc{}
	d.fn = k.fn
	d.groups = [3]uint32{uint32(groups.X), uint32(groups.Y), uint32(groups.Z)}
	d.threads = [3]uint32{uint32(threads.X), uint32(threads.Y), uint32(threads.Z)}
	d.seed = seed
	ngroups := uint64(groups.X) * uint64(groups.Y) * uint64(groups.Z)
	d.nthreads = uint32(l.threads)
	if k.nsPerGroup > 0 && float64(ngroups)*k.nsPerGroup < smallDispatchNs {
		// Waking the pool costs more than this dispatch's work.
		d.nthreads = 1
	}
	var bound [maxBuffers]int64
	for i := range bound {
		bound[i] = -1
	}
	for _, a := range args {
		if a.Index < 0 || a.Index >= maxBuffers {
			return fmt.Errorf("emu: kernel %s: argument index %d out of range 0..30", k.name, a.Index)
		}
		switch {
		case a.Threadgroup > 0:
			if !k.tg[a.Index] {
				continue
			}
			if a.Threadgroup%16 != 0 {
				return fmt.Errorf("emu: kernel %s: [[threadgroup(%d)]] length %d must be a multiple of 16 (as Metal requires)", k.name, a.Index, a.Threadgroup)
			}
			d.tglen[a.Index] = uint32(a.Threadgroup)
		case a.Bytes != nil:
			if len(a.Bytes) > maxSetBytes {
				return fmt.Errorf("emu: kernel %s: [[buffer(%d)]]: %d bytes of constant data, at most %d (use a buffer)", k.name, a.Index, len(a.Bytes), maxSetBytes)
			}
			dst := l.arena[a.Index*maxSetBytes : (a.Index+1)*maxSetBytes]
			n := copy(dst, a.Bytes)
			clear(dst[n:])
			d.buf[a.Index] = uint64(uintptr(unsafe.Pointer(&dst[0])))
			d.bufLen[a.Index] = uint64(len(a.Bytes))
			bound[a.Index] = int64(len(a.Bytes))
		default:
			if len(a.Buffer) > 0 {
				d.buf[a.Index] = uint64(uintptr(unsafe.Pointer(&a.Buffer[0])))
			}
			d.bufLen[a.Index] = uint64(len(a.Buffer))
			bound[a.Index] = int64(len(a.Buffer))
		}
	}
	for _, p := range k.params {
		switch p.Attr {
		case "buffer":
			if bound[p.Index] < 0 {
				return fmt.Errorf("emu: kernel %s: [[buffer(%d)]] (%s) is not bound", k.name, p.Index, p.Text)
			}
			if need := k.minSize[p.Index]; bound[p.Index] < need {
				return fmt.Errorf("emu: kernel %s: [[buffer(%d)]] (%s) has %d bytes, needs at least %d", k.name, p.Index, p.Text, bound[p.Index], need)
			}
		case "threadgroup":
			if d.tglen[p.Index] == 0 {
				return fmt.Errorf("emu: kernel %s: [[threadgroup(%d)]] (%s) has no length", k.name, p.Index, p.Text)
			}
		}
	}
	start := time.Now()
	r, _, _ := purego.SyscallN(l.dispatch, uintptr(unsafe.Pointer(d)))
	runtime.KeepAlive(args)
	if ngroups > 0 {
		// CPU time per threadgroup (wall time × threads used), smoothed.
		ns := float64(time.Since(start).Nanoseconds()) * float64(d.nthreads) / float64(ngroups)
		if k.nsPerGroup == 0 {
			k.nsPerGroup = ns
		} else {
			k.nsPerGroup += (ns - k.nsPerGroup) / 8
		}
	}
	if r != 0 {
		msg := string(d.err[:])
		if i := strings.IndexByte(msg, 0); i >= 0 {
			msg = msg[:i]
		}
		return fmt.Errorf("emu: kernel %s: %s", k.name, msg)
	}
	return nil
}

// Memory is page-backed memory outside Go's heap, for device buffers: its
// address never changes, its last byte sits right before an inaccessible
// guard page, and another guard page precedes its first page, so a kernel
// running off either end of a buffer faults (a dispatch error naming the
// buffer) instead of silently reading or corrupting a neighbour. Past the
// end the fault is immediate; before the start it comes once the access
// leaves the padding in front of the data (less than a page).
type Memory struct {
	mapping []byte
	data    []byte
}

// Alloc maps n zeroed bytes. The start is 16-byte aligned (Metal aligns
// buffers at least that much; kernels load float4s).
func Alloc(n int) (*Memory, error) {
	if n < 0 {
		return nil, fmt.Errorf("emu: negative allocation %d", n)
	}
	page := os.Getpagesize()
	padded := (n + 15) &^ 15
	body := (padded + page - 1) / page * page
	if body == 0 {
		body = page
	}
	m, err := unix.Mmap(-1, 0, page+body+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("emu: allocating %d bytes: %w", n, err)
	}
	if err := unix.Mprotect(m[:page], unix.PROT_NONE); err != nil {
		unix.Munmap(m)
		return nil, fmt.Errorf("emu: guard page: %w", err)
	}
	if err := unix.Mprotect(m[page+body:], unix.PROT_NONE); err != nil {
		unix.Munmap(m)
		return nil, fmt.Errorf("emu: guard page: %w", err)
	}
	start := page + body - padded
	return &Memory{mapping: m, data: m[start : start+n : start+n]}, nil
}

// Bytes is the memory; it stays valid until Free.
func (m *Memory) Bytes() []byte { return m.data }

// Free unmaps the memory.
func (m *Memory) Free() error {
	if m.mapping == nil {
		return nil
	}
	err := unix.Munmap(m.mapping)
	m.mapping, m.data = nil, nil
	return err
}
