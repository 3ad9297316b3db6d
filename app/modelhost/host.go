package modelhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
)

// Model states.
const (
	StateLoading  = "loading"
	StateReady    = "ready"
	StateError    = "error"
	StateUnloaded = "unloaded"
)

// ErrLoading is wrapped by Host.Current while the model loads.
var ErrLoading = errors.New("the model is loading")

// ModelState is the model's state as the window and the tray show it.
type ModelState struct {
	State    string  `json:"state"` // loading, ready, error or unloaded
	Name     string  `json:"name"`  // the model's name (Name), or "Suzuran Tiny"
	Dir      string  `json:"dir"`
	Demo     bool    `json:"demo"`     // the demo model Suzuran Tiny
	Progress float64 `json:"progress"` // 0..1 while loading
	Error    string  `json:"error"`
	Backend  string  `json:"backend"` // the backend, once loaded ("cpu: 2 threads")
	// Checking is set while the GPU self-check runs, before the model is
	// ready (the window says "Checking the GPU…").
	Checking bool `json:"checking"`
	// Fallback says in words why the model runs on the CPU although the
	// GPU was asked for ("Running on the CPU: the GPU check failed — …;
	// answers are slower"); "" when it runs where it was asked to.
	Fallback string `json:"fallback"`
}

// OpenFunc starts an engine on the model in dir, once its weights were
// read: on the GPU when check passes, else on the CPU.
type OpenFunc func(dir string, opts engine.LoadOptions, check gpucheck.Options) (*engine.Engine, gpucheck.Result, error)

// Options configure a Host.
type Options struct {
	// Load are the engine's options. ContextTokens and Parallel, when set,
	// are asked at each load instead (the settings may change them).
	Load          engine.LoadOptions
	ContextTokens func() int
	Parallel      func() int
	// GPU configures the GPU self-check and the CPU fallback; its
	// OnCheck and OnFallback are called as well as the host's own.
	GPU gpucheck.Options
	// KeepAlive is how long an idle model stays loaded; nil, or 0 or less,
	// keeps it until Close.
	KeepAlive func() time.Duration
	// OnChange is told each new state. It runs under the host's lock: it
	// must not call the host.
	OnChange func(ModelState)
	// Open starts the engine; nil is gpucheck.Load. A model without a chat
	// template loads: the API serves it raw completions, and a chat
	// request gets an error that says the template is missing.
	Open OpenFunc
}

// Host owns the engine: it loads it in the background with progress,
// hands it to the window and the API, unloads it after the keep-alive
// time, and reloads it on the next request. Create it with New.
type Host struct {
	o Options

	mu      sync.Mutex
	recheck bool // the next load runs the GPU self-check anew
	state   ModelState
	engine  *engine.Engine
	loaded  chan struct{} // closed when the load under way ends
	users   int           // requests running on engine
	idle    *time.Timer
	closed  bool
	loadGen int            // counts loads, so that a superseded load discards its engine
	loads   sync.WaitGroup // the loads under way, superseded ones too
}

// New returns a Host with no model; Load starts one.
func New(o Options) *Host {
	if o.Open == nil {
		o.Open = gpucheck.Load
	}
	return &Host{o: o, state: ModelState{State: StateUnloaded}}
}

// Load replaces the model with the one in dir (or reloads it) in the
// background; Wait waits for it.
func (h *Host) Load(dir string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.dropEngineLocked()
	h.startLoadLocked(dir)
}

// RecheckGPU loads the model again with the GPU self-check run anew,
// whatever result is remembered.
func (h *Host) RecheckGPU() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.recheck = true
	h.dropEngineLocked()
	h.startLoadLocked(h.state.Dir)
}

func (h *Host) startLoadLocked(dir string) {
	h.loadGen++
	gen := h.loadGen
	h.state = ModelState{State: StateLoading, Dir: dir, Name: Name(dir), Demo: IsDemo(dir)}
	h.loaded = make(chan struct{})
	h.emitLocked()
	opts := h.o.Load
	if h.o.ContextTokens != nil {
		opts.ContextTokens = h.o.ContextTokens()
	}
	if h.o.Parallel != nil {
		opts.Parallel = h.o.Parallel()
	}
	check := h.o.GPU
	check.Recheck, h.recheck = h.recheck || check.Recheck, false
	onCheck, onFallback := check.OnCheck, check.OnFallback
	check.OnCheck = func() {
		h.setChecking(gen)
		if onCheck != nil {
			onCheck()
		}
	}
	check.OnFallback = func(r gpucheck.Result) {
		h.fellBack(gen, r)
		if onFallback != nil {
			onFallback(r)
		}
	}
	done := h.loaded
	h.loads.Add(1)
	go func() {
		defer h.loads.Done()
		defer close(done)
		e, res, err := h.loadEngine(gen, dir, opts, check)
		h.mu.Lock()
		if gen != h.loadGen || h.closed {
			h.mu.Unlock()
			if e != nil {
				e.Close()
			}
			return
		}
		defer h.mu.Unlock()
		if err != nil {
			h.state.State, h.state.Error, h.state.Progress, h.state.Checking = StateError, err.Error(), 0, false
		} else {
			h.engine = e
			h.state.State, h.state.Progress, h.state.Backend = StateReady, 1, e.BackendName()
			h.state.Checking, h.state.Fallback = false, res.Message
			h.armIdleLocked()
		}
		h.emitLocked()
	}()
}

// loadEngine reads the weights once through the page cache with progress
// (the engine maps them, and on a cold start that read is what takes the
// time), then starts the engine on them. A load superseded while it reads
// stops there.
func (h *Host) loadEngine(gen int, dir string, opts engine.LoadOptions, check gpucheck.Options) (*engine.Engine, gpucheck.Result, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	var total, done int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			total += st.Size()
		}
	}
	buf := make([]byte, 4<<20)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, gpucheck.Result{}, fmt.Errorf("opening %s: %w", name, err)
		}
		for {
			n, err := f.Read(buf)
			done += int64(n)
			if total > 0 && !h.setProgress(gen, 0.95*float64(done)/float64(total)) {
				f.Close()
				return nil, gpucheck.Result{}, errSuperseded
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return nil, gpucheck.Result{}, fmt.Errorf("reading %s: %w", name, err)
			}
		}
		f.Close()
	}
	return h.o.Open(dir, opts, check)
}

var errSuperseded = errors.New("another load took this one's place")

// setProgress records the progress of load gen; false once that load was
// superseded or the host closed.
func (h *Host) setProgress(gen int, p float64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.loadGen || h.closed {
		return false
	}
	// Whole percents are enough for the tray and the window.
	if h.state.State != StateLoading || int(p*100) == int(h.state.Progress*100) {
		return true
	}
	h.state.Progress = p
	h.emitLocked()
	return true
}

// setChecking says that the GPU self-check of load gen runs.
func (h *Host) setChecking(gen int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.loadGen || h.state.State != StateLoading {
		return
	}
	h.state.Checking = true
	h.emitLocked()
}

// fellBack: the engine of load gen moved to the CPU after a GPU failure
// while answering; the window and the tray say so.
func (h *Host) fellBack(gen int, r gpucheck.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.loadGen || h.engine == nil {
		return
	}
	h.state.Fallback, h.state.Backend = r.Message, h.engine.BackendName()
	h.emitLocked()
}

// Acquire waits for the model to be ready (loading it if it was unloaded)
// and holds it until Release; the keep-alive clock stops meanwhile.
func (h *Host) Acquire(ctx context.Context) (*engine.Engine, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, engine.ErrClosed
		}
		switch h.state.State {
		case StateReady:
			e := h.holdLocked()
			h.mu.Unlock()
			return e, nil
		case StateError:
			err := errors.New(h.state.Error)
			h.mu.Unlock()
			return nil, err
		case StateUnloaded:
			if h.state.Dir == "" {
				h.mu.Unlock()
				return nil, errNoModel
			}
			h.startLoadLocked(h.state.Dir)
		}
		wait := h.loaded
		h.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

var errNoModel = errors.New("no model was loaded")

// TryAcquire is Acquire without waiting: the engine when it is loaded
// (Release it after), else nil.
func (h *Host) TryAcquire() *engine.Engine {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.state.State != StateReady {
		return nil
	}
	return h.holdLocked()
}

func (h *Host) holdLocked() *engine.Engine {
	h.users++
	if h.idle != nil {
		h.idle.Stop()
	}
	return h.engine
}

// Release ends what Acquire or TryAcquire started.
func (h *Host) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.users--
	h.armIdleLocked()
}

// Current returns the engine and the model's name when it is ready, for
// the API server: a request counts as use. While the model loads (or
// after the keep-alive unloaded it, which starts a reload) the error wraps
// ErrLoading.
func (h *Host) Current(ctx context.Context) (*engine.Engine, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch h.state.State {
	case StateReady:
		h.armIdleLocked()
		return h.engine, h.state.Name, nil
	case StateError:
		return nil, "", fmt.Errorf("the model %s failed to load: %s", h.state.Name, h.state.Error)
	case StateUnloaded:
		if h.state.Dir == "" {
			return nil, "", errNoModel
		}
		if !h.closed {
			h.startLoadLocked(h.state.Dir)
		}
	}
	return nil, "", fmt.Errorf("%s (%.0f %%): %w", h.state.Name, 100*h.state.Progress, ErrLoading)
}

// Status returns the model's state.
func (h *Host) Status() ModelState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

// Wait waits for the load under way (if any) to end and returns the
// model's state, with the load's error when it failed.
func (h *Host) Wait(ctx context.Context) (ModelState, error) {
	h.mu.Lock()
	loading := h.loaded
	h.mu.Unlock()
	if loading != nil {
		select {
		case <-loading:
		case <-ctx.Done():
			return h.Status(), ctx.Err()
		}
	}
	m := h.Status()
	if m.State == StateError {
		return m, errors.New(m.Error)
	}
	return m, nil
}

// ThinkingDefault is whether an API request that does not say thinks: off
// on a model that cannot think (Capabilities), else nil: the API's own
// default.
func (h *Host) ThinkingDefault() *bool {
	if !CapabilitiesOf(h.Status().Dir).Thinking {
		off := false
		return &off
	}
	return nil
}

// ResetIdle restarts the keep-alive clock, for a keep-alive time that
// changed.
func (h *Host) ResetIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armIdleLocked()
}

// armIdleLocked (re)starts the keep-alive clock when nothing runs.
func (h *Host) armIdleLocked() {
	if h.idle != nil {
		h.idle.Stop()
	}
	if h.o.KeepAlive == nil || h.users > 0 || h.engine == nil {
		return
	}
	keep := h.o.KeepAlive()
	if keep <= 0 {
		return
	}
	gen := h.loadGen
	h.idle = time.AfterFunc(keep, func() { h.unloadIdle(gen) })
}

func (h *Host) unloadIdle(gen int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.loadGen || h.users > 0 || h.state.State != StateReady {
		return
	}
	h.dropEngineLocked()
	h.state = ModelState{State: StateUnloaded, Dir: h.state.Dir, Name: h.state.Name, Demo: h.state.Demo}
	h.emitLocked()
}

// dropEngineLocked closes the engine in the background: Close waits for
// a running request, and the lock must not.
func (h *Host) dropEngineLocked() {
	if h.engine != nil {
		e := h.engine
		h.engine = nil
		go e.Close()
	}
}

func (h *Host) emitLocked() {
	if h.o.OnChange != nil {
		h.o.OnChange(h.state)
	}
}

// Close unloads the model, after the loads under way (if any) have
// stopped, so that no engine outlives it.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	e := h.engine
	h.engine = nil
	if h.idle != nil {
		h.idle.Stop()
	}
	h.mu.Unlock()
	h.loads.Wait()
	if e != nil {
		return e.Close()
	}
	return nil
}
