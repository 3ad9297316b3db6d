package gpu

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/metalkernels/emu"
)

// envSeed reads SUZURAN_KERNEL_SEED, to replay a failing random input.
func envSeed() uint64 {
	s, _ := strconv.ParseUint(os.Getenv("SUZURAN_KERNEL_SEED"), 10, 64)
	return s
}

func moduleRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

var (
	libOnce sync.Once
	lib     *emu.Library
	libErr  error
)

func testLibrary(t testing.TB) *emu.Library {
	libOnce.Do(func() {
		dir := filepath.Join(moduleRoot(t), "metalkernels")
		ents, err := os.ReadDir(dir)
		if err != nil {
			libErr = err
			return
		}
		src := map[string]string{}
		for _, e := range ents {
			if n := e.Name(); strings.HasSuffix(n, ".metal") || strings.HasSuffix(n, ".h") {
				b, err := os.ReadFile(filepath.Join(dir, n))
				if err != nil {
					libErr = err
					return
				}
				src[n] = string(b)
			}
		}
		lib, libErr = emu.Compile(src, emu.Options{PathPrefix: "metalkernels/"})
	})
	if libErr != nil {
		t.Fatal(libErr)
	}
	return lib
}

// tdev is a minimal device.Device over the emulator library for the kernel
// tests: buffers are guard-paged host memory, a command buffer runs its
// dispatches in order at Commit.
type tdev struct {
	lib  *emu.Library
	seed uint64
}

type tbuf struct{ m *emu.Memory }

func (b *tbuf) Bytes() []byte { return b.m.Bytes() }
func (b *tbuf) Len() int      { return len(b.m.Bytes()) }
func (b *tbuf) Release()      { b.m.Free() }

type wbuf struct{ b []byte }

func (b *wbuf) Bytes() []byte { return b.b }
func (b *wbuf) Len() int      { return len(b.b) }
func (b *wbuf) Release()      {}

type tpipe struct{ k *emu.Kernel }

func (p *tpipe) Name() string                  { return p.k.Name() }
func (p *tpipe) MaxThreadsPerThreadgroup() int { return 1024 }
func (p *tpipe) ThreadExecutionWidth() int     { return 32 }

type tcb struct {
	d   *tdev
	ds  []device.Dispatch
	err error
}

func (d *tdev) Name() string { return "emu (kernel tests)" }
func (d *tdev) NewBuffer(n int) (device.Buffer, error) {
	m, err := emu.Alloc(n)
	if err != nil {
		return nil, err
	}
	return &tbuf{m}, nil
}
func (d *tdev) WrapBytes(b []byte) (device.Buffer, error) { return &wbuf{b}, nil }
func (d *tdev) MaxBufferLength() int                      { return 1 << 40 }
func (d *tdev) Pipeline(name string) (device.Pipeline, error) {
	k, err := d.lib.Kernel(name)
	if err != nil {
		return nil, err
	}
	return &tpipe{k}, nil
}
func (d *tdev) NewCommandBuffer() (device.CommandBuffer, error) { return &tcb{d: d}, nil }
func (d *tdev) Close() error                                    { return nil }

func (c *tcb) Dispatch(d device.Dispatch) { c.ds = append(c.ds, d) }
func (c *tcb) Barrier()                   {}
func (c *tcb) Commit() {
	for _, d := range c.ds {
		var args []emu.Arg
		for _, a := range d.Args {
			switch {
			case a.Buffer != nil:
				args = append(args, emu.Arg{Index: a.Index, Buffer: a.Buffer.Bytes()[a.Offset:]})
			case a.Bytes != nil:
				args = append(args, emu.Arg{Index: a.Index, Bytes: a.Bytes})
			default:
				args = append(args, emu.Arg{Index: a.Index, Threadgroup: a.Threadgroup})
			}
		}
		k := d.Pipeline.(*tpipe).k
		start := time.Now()
		err := k.Dispatch(emu.Size3(d.Threadgroups), emu.Size3(d.Threads), args, c.d.seed)
		kernelTime[k.Name()] += time.Since(start)
		if err != nil {
			c.err = err
			return
		}
	}
}
func (c *tcb) Wait() error { return c.err }

var kernelTime = map[string]time.Duration{}

// openTestDevice opens the emulator with the given fiber-order seed.
func openTestDevice(t testing.TB, seed uint64) device.Device {
	t.Helper()
	return &tdev{lib: testLibrary(t), seed: seed}
}
