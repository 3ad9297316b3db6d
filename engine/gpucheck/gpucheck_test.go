package gpucheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// faultDevice is the emulator standing in for Metal, with the failures a
// Mac's GPU can produce switched on: a kernel Apple's compiler refuses, a
// pipeline it cannot build, a command buffer that ends in error (failWaits;
// hang makes Wait block instead, a hung GPU), and wrong numbers (corrupt:
// the wrapped weights reach the kernels with every other byte's top bit
// flipped, which flips the sign of every bf16 value and scale).
type faultDevice struct {
	device.Device
	compile, pipeline, corrupt, hang bool
	failWaits                        atomic.Bool
	waits                            atomic.Int64
	// failFrom, when above 0, fails every command buffer from that wait on.
	failFrom atomic.Int64
	release  chan struct{}
}

func (d *faultDevice) Pipeline(name string) (device.Pipeline, error) {
	switch {
	case d.compile:
		return nil, fmt.Errorf("metal: compiling metalkernels/gemv.metal (MSL 3.1) on %s: program_source:41:9: error: use of undeclared identifier 'simd_sum4'", d.Name())
	case d.pipeline:
		return nil, fmt.Errorf("metal: building the pipeline for kernel %q: Compiler encountered an internal error", name)
	}
	return d.Device.Pipeline(name)
}

func (d *faultDevice) WrapBytes(b []byte) (device.Buffer, error) {
	if !d.corrupt {
		return d.Device.WrapBytes(b)
	}
	buf, err := d.Device.NewBuffer(len(b))
	if err != nil {
		return nil, err
	}
	out := buf.Bytes()
	copy(out, b)
	for i := 1; i < len(out); i += 2 {
		out[i] ^= 0x80
	}
	return buf, nil
}

func (d *faultDevice) NewCommandBuffer() (device.CommandBuffer, error) {
	cb, err := d.Device.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	return &faultBuffer{CommandBuffer: cb, d: d}, nil
}

type faultBuffer struct {
	device.CommandBuffer
	d *faultDevice
}

func (c *faultBuffer) Wait() error {
	err := c.CommandBuffer.Wait()
	n := c.d.waits.Add(1)
	if c.d.hang {
		<-c.d.release
	}
	if from := c.d.failFrom.Load(); from > 0 && n >= from {
		c.d.failWaits.Store(true)
	}
	if err == nil && c.d.failWaits.Load() {
		err = errors.New("metal: command buffer failed: Internal Error (0000000e:Internal Error) (victim of GPU error/recovery)")
	}
	return err
}

// rig opens fault devices on the emulator for Load and counts them.
type rig struct {
	t      *testing.T
	mu     sync.Mutex
	opened []*faultDevice
	setup  func(*faultDevice)
	absent bool
}

func (r *rig) open(name string, threads int) (device.Device, error) {
	if name != "emu" {
		r.t.Errorf("Load opened device %q, want emu", name)
	}
	if r.absent {
		return nil, errors.New("metal: no Metal device found (MTLCreateSystemDefaultDevice and MTLCopyAllDevices returned none); use --backend cpu on this machine")
	}
	dev, err := emu.New(emu.Options{Threads: 2})
	if err != nil {
		return nil, err
	}
	f := &faultDevice{Device: dev, release: make(chan struct{})}
	if r.setup != nil {
		r.setup(f)
	}
	r.mu.Lock()
	r.opened = append(r.opened, f)
	r.mu.Unlock()
	return f, nil
}

func (r *rig) last() *faultDevice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opened[len(r.opened)-1]
}

// ask submits a prompt and reads the answer; it returns the text and the
// final error.
func ask(t *testing.T, e *engine.Engine) (string, error) {
	t.Helper()
	s, err := e.Submit(context.Background(), engine.Request{Prompt: []int{3, 141, 59, 26, 5}, MaxTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	n := 0
	for ev := range s.Events {
		b.WriteString(ev.Text)
		n += len(ev.IDs)
	}
	_, err = s.Result()
	if err == nil && n == 0 {
		t.Fatal("the answer has no tokens")
	}
	return b.String(), err
}

func paths(t *testing.T) (model, demo string) {
	return fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit"), fixtures.Path(t, "qwen35moe-tiny", "hf-bf16")
}

func loadOpts() engine.LoadOptions {
	return engine.LoadOptions{Backend: "emu", Threads: 2, ContextTokens: 256, CacheBytes: -1}
}

// TestFailedCheckFallsBack injects each failure the self-check must catch
// and checks that the engine then runs on the CPU and answers, that the
// Result says which stage failed in the words the window shows, and that
// the failure is remembered: the next Load, with a GPU that works, goes
// straight to the CPU without checking again.
func TestFailedCheckFallsBack(t *testing.T) {
	dir, demo := paths(t)
	cases := []struct {
		name   string
		setup  func(*faultDevice)
		absent bool
		stage  string
		words  string
	}{
		{"device missing", nil, true, StageDevice, "no usable GPU was found"},
		{"compile error", func(d *faultDevice) { d.compile = true }, false, StageCompile, "the GPU kernels did not compile"},
		{"pipeline error", func(d *faultDevice) { d.pipeline = true }, false, StagePipeline, "a GPU kernel could not be prepared"},
		{"command buffer error", func(d *faultDevice) { d.failWaits.Store(true) }, false, StageCommandBuffer, "the GPU reported an error (hf-bf16: prompt pass on gpu: emu: 2 threads: metal: command buffer failed"},
		{"numeric mismatch", func(d *faultDevice) { d.corrupt = true }, false, StageNumeric, "the GPU computed numbers that differ from the CPU's"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "gpu-check.json")
			r := &rig{t: t, setup: c.setup, absent: c.absent}
			o := Options{Version: "1.2.3", StateFile: state, DemoDir: demo, OpenDevice: r.open}
			e, res, err := Load(dir, loadOpts(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if !strings.HasPrefix(e.BackendName(), "cpu") {
				t.Errorf("backend %q after a failed check, want the cpu backend", e.BackendName())
			}
			if !res.Ran || res.OK || !res.Fallback || res.Stage != c.stage {
				t.Errorf("result ran %v ok %v fallback %v stage %q, want ran, not ok, fallback, stage %q (error %q)", res.Ran, res.OK, res.Fallback, res.Stage, c.stage, res.Error)
			}
			want := "Running on the CPU: the GPU check failed — " + c.words
			if !strings.HasPrefix(res.Message, want) || !strings.HasSuffix(res.Message, "; answers are slower") {
				t.Errorf("message %q, want it to start %q and end \"; answers are slower\"", res.Message, want)
			}
			if _, err := ask(t, e); err != nil {
				t.Errorf("the CPU did not answer: %v", err)
			}
			// Remembered: the next start takes the CPU at once, even with
			// a GPU that would now pass. (Without a device there was no GPU
			// to remember: one that appears is a GPU changed, checked.)
			r.setup, r.absent = nil, false
			e2, res2, err := Load(dir, loadOpts(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer e2.Close()
			if c.absent {
				if !res2.Ran || !res2.OK || !strings.Contains(e2.BackendName(), "emu") {
					t.Errorf("a GPU appeared: ran %v ok %v backend %q, want it checked and used", res2.Ran, res2.OK, e2.BackendName())
				}
				return
			}
			if res2.Ran || !res2.Fallback || res2.Stage != c.stage || !strings.HasPrefix(e2.BackendName(), "cpu") {
				t.Errorf("second start: ran %v fallback %v stage %q backend %q, want the remembered failure on the cpu backend", res2.Ran, res2.Fallback, res2.Stage, e2.BackendName())
			}
			// Recheck (Settings) runs it again: the GPU now passes.
			o.Recheck = true
			e3, res3, err := Load(dir, loadOpts(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer e3.Close()
			if !res3.Ran || !res3.OK || res3.Fallback || !strings.Contains(e3.BackendName(), "emu") {
				t.Errorf("recheck: ran %v ok %v fallback %v backend %q, want a passing check on emu", res3.Ran, res3.OK, res3.Fallback, e3.BackendName())
			}
		})
	}
}

// TestBelowApple7 is the device's refusal of a GPU below the Apple7
// family (the Metal device's Pipeline error): the words say so.
func TestBelowApple7(t *testing.T) {
	dir, _ := paths(t)
	r := &rig{t: t}
	o := Options{Version: "1", OpenDevice: func(name string, threads int) (device.Device, error) {
		d, err := r.open(name, threads)
		if err != nil {
			return nil, err
		}
		return &apple5{d}, nil
	}}
	e, res, err := Load(dir, loadOpts(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if res.Stage != StageDevice || !strings.Contains(res.Message, "older than the Apple M1 family") || !strings.HasPrefix(e.BackendName(), "cpu") {
		t.Errorf("stage %q message %q backend %q", res.Stage, res.Message, e.BackendName())
	}
}

type apple5 struct{ device.Device }

func (d *apple5) Pipeline(string) (device.Pipeline, error) {
	return nil, errors.New("metal: metal: Apple Paravirtual device is not of the Apple7 GPU family (M1) or later, which the kernels need (SIMD-group reductions, simdgroup matrices); run on an Apple silicon Mac rather than a virtual machine, or use --backend cpu")
}

// TestPassingCheckIsRemembered: a passing check runs once per version, OS
// and GPU. The second start gets a GPU that computes wrong numbers: had
// the check run again it would have fallen back, so running on emu shows
// it did not. A new app version checks again, and catches it.
func TestPassingCheckIsRemembered(t *testing.T) {
	dir, demo := paths(t)
	state := filepath.Join(t.TempDir(), "config", "gpu-check.json")
	r := &rig{t: t}
	o := Options{Version: "1.2.3", StateFile: state, DemoDir: demo, OpenDevice: r.open}
	start := time.Now()
	e, res, err := Load(dir, loadOpts(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Ran || !res.OK || res.Fallback || !strings.Contains(e.BackendName(), "emu") {
		t.Fatalf("first start: ran %v ok %v fallback %v backend %q (%s), want a passing check on emu", res.Ran, res.OK, res.Fallback, e.BackendName(), res.Error)
	}
	if res.DurationS <= 0 || res.DurationS > time.Since(start).Seconds() || res.Device == "" || res.OS == "" || res.Library != "emulator" {
		t.Errorf("result %+v: want the check's time and the key", res)
	}
	if _, err := ask(t, e); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if got, ok := Recall(state); !ok || !got.OK || got.Version != "1.2.3" {
		t.Fatalf("remembered %+v, %v", got, ok)
	}

	r.setup = func(d *faultDevice) { d.corrupt = true }
	e2, res2, err := Load(dir, loadOpts(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Ran || !res2.OK || !strings.Contains(e2.BackendName(), "emu") {
		t.Errorf("second start: ran %v ok %v backend %q, want the remembered pass on emu, unchecked", res2.Ran, res2.OK, e2.BackendName())
	}
	e2.Close()

	o.Version = "1.2.4"
	e3, res3, err := Load(dir, loadOpts(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer e3.Close()
	if !res3.Ran || res3.Stage != StageNumeric || !strings.HasPrefix(e3.BackendName(), "cpu") {
		t.Errorf("new version: ran %v stage %q backend %q, want the check run again, failing on the numbers", res3.Ran, res3.Stage, e3.BackendName())
	}
}

// TestHungCheckTimesOut: a GPU whose command buffers never complete ends
// the check at its timeout, on the CPU.
func TestHungCheckTimesOut(t *testing.T) {
	dir, _ := paths(t)
	r := &rig{t: t, setup: func(d *faultDevice) { d.hang = true }}
	o := Options{Version: "1", OpenDevice: r.open, Timeout: 2 * time.Second}
	e, res, err := Load(dir, loadOpts(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	defer close(r.last().release)
	if res.Stage != StageTimeout || !strings.Contains(res.Message, "the GPU did not answer in time") || !strings.HasPrefix(e.BackendName(), "cpu") {
		t.Errorf("stage %q message %q backend %q", res.Stage, res.Message, e.BackendName())
	}
	if _, err := ask(t, e); err != nil {
		t.Errorf("the CPU did not answer: %v", err)
	}
}

// TestFailureDuringUse: the check passes, then a command buffer fails
// while answering — in the prompt's pass, or a few decode steps in, with a
// pipelined step in flight. That answer ends with engine.ErrBackendFailed,
// OnFallback is told in words, the failure is remembered, a question that
// waited meanwhile and the next one are answered on the CPU by the same
// engine, and the GPU runs nothing more.
func TestFailureDuringUse(t *testing.T) {
	for _, c := range []struct {
		name  string
		after int64 // command buffers that succeed first
	}{{"prompt", 0}, {"decode", 3}} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := paths(t)
			state := filepath.Join(t.TempDir(), "gpu-check.json")
			r := &rig{t: t}
			told := make(chan Result, 1)
			o := Options{Version: "1", StateFile: state, OpenDevice: r.open, OnFallback: func(res Result) { told <- res }}
			lo := loadOpts()
			lo.Parallel = 1 // the second question waits behind the first
			e, res, err := Load(dir, lo, o)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if !res.OK || !strings.Contains(e.BackendName(), "emu") {
				t.Fatalf("ok %v backend %q (%s)", res.OK, e.BackendName(), res.Error)
			}
			d := r.last()
			d.failFrom.Store(d.waits.Load() + c.after + 1)
			running, err := e.Submit(context.Background(), engine.Request{Prompt: []int{3, 141, 59, 26, 5}, MaxTokens: 6})
			if err != nil {
				t.Fatal(err)
			}
			waiting, err := e.Submit(context.Background(), engine.Request{Prompt: []int{7, 8, 9}, MaxTokens: 3})
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for ev := range running.Events {
				got += len(ev.IDs)
			}
			_, err = running.Result()
			if c.after > 1 && got == 0 {
				t.Error("no token came before a failure a few steps in")
			}
			if !errors.Is(err, engine.ErrBackendFailed) || !strings.Contains(err.Error(), "command buffer failed") {
				t.Fatalf("answer during the failure: %v, want engine.ErrBackendFailed with the GPU's error", err)
			}
			select {
			case f := <-told:
				if f.Stage != StageUse || !f.Fallback || !strings.HasPrefix(f.Message, "Running on the CPU: the GPU failed while answering — the GPU reported an error") {
					t.Errorf("told %+v", f)
				}
			case <-time.After(30 * time.Second): // generous: a loaded machine
				t.Fatal("OnFallback was not told")
			}
			if !strings.HasPrefix(e.BackendName(), "cpu") {
				t.Errorf("backend %q after the failure, want cpu", e.BackendName())
			}
			for range waiting.Events {
			}
			if _, err := waiting.Result(); err != nil {
				t.Errorf("the question that waited failed: %v", err)
			}
			waits := d.waits.Load()
			if _, err := ask(t, e); err != nil {
				t.Errorf("the next question failed: %v", err)
			}
			if n := d.waits.Load(); n != waits {
				t.Errorf("the GPU ran %d more command buffers after the fallback", n-waits)
			}
			if got, ok := Recall(state); !ok || got.OK || got.Stage != StageUse {
				t.Errorf("remembered %+v, want the failure during use", got)
			}
			if _, err := os.Stat(state + ".tmp"); err == nil {
				t.Error("the temporary state file was left behind")
			}
		})
	}
}

// TestBrokenModelIsNotTheGPU: a model folder that does not load is no GPU
// failure: Load returns the loader's error, and nothing is remembered that
// would keep a later, fixed model off the GPU.
func TestBrokenModelIsNotTheGPU(t *testing.T) {
	_, demo := paths(t)
	state := filepath.Join(t.TempDir(), "gpu-check.json")
	r := &rig{t: t}
	missing := filepath.Join(t.TempDir(), "no-model")
	e, _, err := Load(missing, loadOpts(), Options{Version: "1", StateFile: state, DemoDir: demo, OpenDevice: r.open})
	if err == nil {
		e.Close()
		t.Fatal("a missing model folder loaded")
	}
	if !strings.Contains(err.Error(), "no-model") {
		t.Errorf("error %v does not name the folder", err)
	}
	if _, err := os.Stat(state); err == nil {
		t.Error("a model that does not load was remembered as the GPU's result")
	}
}
