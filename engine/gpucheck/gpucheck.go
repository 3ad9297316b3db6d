// Package gpucheck loads a model on the GPU only once the GPU has shown it
// computes the right numbers, and on the CPU otherwise, saying why. The
// app's model host (app/modelhost: the window's and `suzuran serve`'s) and
// the terminal chat load through Load, so they fall back the same way.
//
// The first time a given app version runs on a given OS version and GPU,
// Load runs the self-check before the engine is handed out: the numeric
// check `suzuran doctor` runs (the demo model cut to one DeltaNet and one
// attention layer, GPU against CPU), then the same check on the model being
// loaded, its first layer of each kind, a prompt and a few decode steps.
// Any failure on the way — no device, a GPU below the Apple7 family, a
// kernel that does not compile, a pipeline that cannot be built, a command
// buffer error, a check that does not finish in time, logits beyond the
// tolerance — loads the model on the cpu backend instead, and the Result
// says so in words for the window and the tray. The result is remembered in
// a small JSON file (Options.StateFile) until the version, the OS version or
// the GPU changes, so a passing check is not run again on the next start,
// and a failing one does not cost its time again either; Options.Recheck
// runs it anyway (Settings' "Check the GPU again").
//
// A GPU failure during use, after the check passed (a command buffer error
// mid-answer), moves the engine to the cpu backend (engine.LoadOptions'
// OnFallback): the answer running then fails with a clear error, the
// waiting ones and the conversation are kept, and Options.OnFallback is
// told, with a Result that is remembered too.
package gpucheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/backends"
	"github.com/suzuran-app/suzuran/engine/doctor"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// Stages of the check, Result.Stage: where it failed.
const (
	StageDevice        = "device"         // no GPU device, or one below Apple7
	StageCompile       = "compile"        // a kernel file does not compile
	StagePipeline      = "pipeline"       // a compute pipeline cannot be built
	StageMemory        = "memory"         // a buffer cannot be made or wrapped
	StageCommandBuffer = "command buffer" // the GPU reported an error running work
	StageTimeout       = "timeout"        // the check did not finish in time
	StageNumeric       = "numeric"        // the GPU's logits differ from the CPU's
	StageUse           = "use"            // a failure after the check, while answering
	StageLoad          = "load"           // the model does not load on the GPU backend
)

// DefaultTimeout bounds the self-check: the demo model's check takes
// seconds on any Mac, the loaded model's first layers a few more; a GPU
// that has not finished in this time is hung (on macOS a command buffer
// that runs too long is also stopped by the system with a timeout error).
const DefaultTimeout = 3 * time.Minute

// Options configure Load.
type Options struct {
	// Version is the app's version; with the OS version and the GPU's name
	// it keys the remembered result.
	Version string
	// StateFile is where the result is remembered (a JSON file in the
	// app's config folder); "" remembers nothing, so every Load checks.
	StateFile string
	// DemoDir is the demo model folder, whose check `suzuran doctor` runs;
	// "" skips that part (the loaded model's check still runs).
	DemoDir string
	// Recheck runs the check even when a result is remembered for this
	// version, OS and GPU.
	Recheck bool
	// Timeout bounds the check; 0 means DefaultTimeout.
	Timeout time.Duration
	// OpenDevice opens the device of the GPU backend name; nil means
	// backends.OpenDevice. Tests inject the GPU's failures here.
	OpenDevice func(name string, threads int) (device.Device, error)
	// OnCheck, when set, is told as the check starts (not when a result is
	// remembered), so that the window can say "Checking the GPU…".
	OnCheck func()
	// OnFallback is told when the engine moved to the CPU during use, with
	// the Result that says why (already remembered). It runs on a
	// goroutine of its own.
	OnFallback func(Result)
}

// Result is what the check found, and what Load did with it.
type Result struct {
	// Backend is the GPU backend asked for ("metal", "emu"); "" when the
	// cpu backend was asked for and nothing was checked.
	Backend string `json:"backend"`
	// Device names the GPU ("metal: Apple M2 Pro"); OS is the OS version
	// and Version the app's: the key of the remembered result.
	Device  string `json:"device"`
	OS      string `json:"os"`
	Version string `json:"version"`
	// Library says where the kernels came from: "bundled" (the app's
	// precompiled .metallib), "compiled" (from source at run time) or
	// "emulator"; "" when no pipeline was built.
	Library string `json:"library,omitempty"`
	// Ran says the check ran in this Load; false when the result was
	// remembered.
	Ran bool `json:"ran"`
	OK  bool `json:"ok"`
	// Stage and Error say where and how the check (or the GPU during use)
	// failed.
	Stage string `json:"stage,omitempty"`
	Error string `json:"error,omitempty"`
	// RelativeError is the largest one of the numeric checks found.
	RelativeError float64   `json:"relative_error"`
	Time          time.Time `json:"time"`
	DurationS     float64   `json:"duration_s"`
	// Fallback says the engine runs on the CPU because of this result;
	// Message says so in words for the window and the tray.
	Fallback bool   `json:"fallback"`
	Message  string `json:"message,omitempty"`
}

// Load opens the model folder dir with lo, as engine.Load does, checking
// the GPU first when lo.Backend is a GPU backend (see the package comment).
// It falls back to the cpu backend on any GPU failure; its error is only
// for a model that does not load on the CPU either. A Result whose
// Fallback is set says why the engine runs on the CPU.
func Load(dir string, lo engine.LoadOptions, o Options) (*engine.Engine, Result, error) {
	if lo.Backend == "" || lo.Backend == "cpu" {
		e, err := engine.Load(dir, lo)
		return e, Result{OK: true}, err
	}
	open := o.OpenDevice
	if open == nil {
		open = func(name string, threads int) (device.Device, error) {
			return backends.OpenDevice(name, backends.Options{Threads: threads})
		}
	}
	r := Result{Backend: lo.Backend, Version: o.Version, OS: doctor.SystemInfo().OSVersion, Time: time.Now().UTC()}
	start := time.Now()
	dev, err := open(lo.Backend, lo.Threads)
	if err != nil {
		r.Ran = true
		r.fail(StageDevice, err)
		r.DurationS = seconds(time.Since(start))
		o.remember(r)
		return loadCPU(dir, lo, r)
	}
	r.Device = dev.Name()
	if old, ok := o.recall(r); ok && !o.Recheck {
		old.Ran = false
		if !old.OK {
			dev.Close()
			return loadCPU(dir, lo, old)
		}
		r = old
	} else {
		r.Ran = true
		if o.OnCheck != nil {
			o.OnCheck()
		}
		watched := &watch{Device: dev}
		ok, err := r.check(watched, dir, o, lo.Threads)
		if err != nil {
			dev.Close()
			return nil, Result{}, err
		}
		r.Library = libraryOf(dev)
		r.DurationS = seconds(time.Since(start))
		if !ok {
			o.remember(r)
			if r.Stage != StageTimeout {
				// A hung check still holds the device: leave it to the
				// goroutine that is stuck in it.
				dev.Close()
			}
			return loadCPU(dir, lo, r)
		}
		o.remember(r)
	}
	lo.Device = dev
	user := lo.OnFallback
	lo.OnFallback = func(cause error) {
		if user != nil {
			user(cause)
		}
		f := r
		f.Ran, f.OK, f.Time = false, false, time.Now().UTC()
		f.fail(StageUse, cause)
		f.Fallback = true
		f.Message = message(f)
		o.remember(f)
		if o.OnFallback != nil {
			o.OnFallback(f)
		}
	}
	e, err := engine.Load(dir, lo)
	if err != nil {
		// The device is closed by Load. Only a model that loads on the CPU
		// says the GPU failed; one that loads nowhere says why itself.
		r.OK = false
		r.fail(StageLoad, err)
		lo.Device, lo.OnFallback = nil, nil
		e, r, err := loadCPU(dir, lo, r)
		if err == nil {
			o.remember(r)
		}
		return e, r, err
	}
	return e, r, nil
}

// loadCPU loads the model on the cpu backend after the GPU failed as r says.
func loadCPU(dir string, lo engine.LoadOptions, r Result) (*engine.Engine, Result, error) {
	r.Fallback = true
	r.Message = message(r)
	lo.Backend, lo.Device, lo.OnFallback = "cpu", nil, nil
	e, err := engine.Load(dir, lo)
	return e, r, err
}

// check runs the demo model's check, then the loaded model's, on dev,
// within the timeout; it records the first failure in r. The error is a
// loaded model that cannot be opened, which no backend would run.
func (r *Result) check(dev *watch, dir string, o Options, threads int) (bool, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type outcome struct {
		stage string
		err   error
		rel   float64
		model error // the loaded model cannot be checked: not the GPU's doing
	}
	done := make(chan outcome, 1)
	go func() {
		var out outcome
		for i, m := range []string{o.DemoDir, dir} {
			if m == "" || (i == 1 && filepath.Clean(m) == filepath.Clean(o.DemoDir)) {
				continue // the demo model itself is loaded: checked once
			}
			n, err := doctor.CheckDevice(dev, m, threads)
			if err != nil {
				// A demo model that does not open leaves the check to the
				// loaded model; a loaded model that does not open fails
				// on every backend, and says so itself.
				if i == 1 {
					out.model = err
					break
				}
				continue
			}
			out.rel = math.Max(out.rel, n.RelativeError)
			if !n.OK {
				out.stage, out.err = dev.stage(), fmt.Errorf("%s: %s", filepath.Base(m), n.Error)
				if out.stage == "" {
					out.stage = StageNumeric
				}
				break
			}
		}
		done <- out
	}()
	select {
	case out := <-done:
		r.RelativeError = out.rel
		if out.model != nil {
			return false, out.model
		}
		if out.err != nil {
			r.fail(out.stage, out.err)
			return false, nil
		}
		r.OK = true
		return true, nil
	case <-ctx.Done():
		r.fail(StageTimeout, fmt.Errorf("the GPU check did not finish in %v", timeout))
		return false, nil
	}
}

func (r *Result) fail(stage string, err error) {
	r.OK = false
	r.Stage = stage
	r.Error = err.Error()
}

// message is what the window and the tray say while the engine runs on
// the CPU because of r.
func message(r Result) string {
	what := "the GPU check failed"
	if r.Stage == StageUse {
		what = "the GPU failed while answering"
	}
	return "Running on the CPU: " + what + " — " + reason(r.Stage, errors.New(r.Error)) + "; answers are slower"
}

// reason says in words what failed, for the message the user reads.
func reason(stage string, err error) string {
	text := err.Error()
	switch stage {
	case StageDevice:
		if strings.Contains(text, "Apple7") {
			return "this GPU is older than the Apple M1 family the kernels need"
		}
		return "no usable GPU was found (" + firstLine(text) + ")"
	case StageCompile:
		return "the GPU kernels did not compile"
	case StagePipeline:
		return "a GPU kernel could not be prepared"
	case StageMemory:
		return "the GPU could not map the model's memory"
	case StageCommandBuffer, StageUse:
		return "the GPU reported an error (" + firstLine(text) + ")"
	case StageTimeout:
		return "the GPU did not answer in time"
	case StageNumeric:
		return "the GPU computed numbers that differ from the CPU's"
	case StageLoad:
		return "the model did not load on the GPU (" + firstLine(text) + ")"
	}
	return firstLine(text)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*100) / 100 }

// libraryOf says where dev's kernels came from (see Result.Library).
func libraryOf(dev device.Device) string {
	if l, ok := dev.(interface{ Library() string }); ok {
		return l.Library()
	}
	if strings.HasPrefix(dev.Name(), "emu") {
		return "emulator"
	}
	return ""
}

// watch is the device under check: it notes the first call that failed,
// so that the Result can say whether compiling, a pipeline, memory or a
// command buffer broke.
type watch struct {
	device.Device
	mu     sync.Mutex
	failed string
}

func (w *watch) note(stage string, err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == "" {
		w.failed = stage
	}
}

func (w *watch) stage() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *watch) Pipeline(name string) (device.Pipeline, error) {
	p, err := w.Device.Pipeline(name)
	if err != nil {
		// The Metal device's Pipeline compiles the library on first use
		// and refuses GPUs below Apple7 there, so its error says which.
		stage := StagePipeline
		switch text := err.Error(); {
		case strings.Contains(text, "Apple7"):
			stage = StageDevice
		case strings.Contains(text, "building the pipeline"):
		case strings.Contains(text, "compil"):
			stage = StageCompile
		}
		w.note(stage, err)
	}
	return p, err
}

func (w *watch) NewBuffer(n int) (device.Buffer, error) {
	b, err := w.Device.NewBuffer(n)
	w.note(StageMemory, err)
	return b, err
}

func (w *watch) WrapBytes(m []byte) (device.Buffer, error) {
	b, err := w.Device.WrapBytes(m)
	w.note(StageMemory, err)
	return b, err
}

func (w *watch) NewCommandBuffer() (device.CommandBuffer, error) {
	cb, err := w.Device.NewCommandBuffer()
	if err != nil {
		w.note(StageCommandBuffer, err)
		return nil, err
	}
	return &watchedBuffer{CommandBuffer: cb, w: w}, nil
}

type watchedBuffer struct {
	device.CommandBuffer
	w *watch
}

func (c *watchedBuffer) Wait() error {
	err := c.CommandBuffer.Wait()
	c.w.note(StageCommandBuffer, err)
	return err
}

// remembered is the state file's content.
type remembered struct {
	Schema int    `json:"schema"`
	Result Result `json:"result"`
}

// recall returns the remembered result for r's version, OS and GPU.
func (o Options) recall(r Result) (Result, bool) {
	if o.StateFile == "" {
		return Result{}, false
	}
	b, err := os.ReadFile(o.StateFile)
	if err != nil {
		return Result{}, false
	}
	var m remembered
	if json.Unmarshal(b, &m) != nil || m.Schema != 1 {
		return Result{}, false
	}
	old := m.Result
	if old.Version != r.Version || old.OS != r.OS || old.Device != r.Device || old.Backend != r.Backend {
		return Result{}, false
	}
	return old, true
}

// remember writes r to the state file, atomically (a temporary file
// renamed over it); a failure to write only means the check runs again.
func (o Options) remember(r Result) {
	if o.StateFile == "" {
		return
	}
	r.Fallback, r.Message = false, ""
	b, err := json.MarshalIndent(remembered{Schema: 1, Result: r}, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(o.StateFile), 0o755); err != nil {
		return
	}
	tmp := o.StateFile + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return
	}
	if err := os.Rename(tmp, o.StateFile); err != nil {
		os.Remove(tmp)
	}
}

// Recall returns the result remembered in stateFile, for reports (`make
// mac-check`, Settings); ok is false when there is none.
func Recall(stateFile string) (Result, bool) {
	b, err := os.ReadFile(stateFile)
	if err != nil {
		return Result{}, false
	}
	var m remembered
	if json.Unmarshal(b, &m) != nil || m.Schema != 1 {
		return Result{}, false
	}
	return m.Result, true
}
