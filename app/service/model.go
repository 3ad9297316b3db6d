package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
	"github.com/suzuran-app/suzuran/engine/prefixstore"
)

// ModelState is the model's state as the window and the tray show it.
type ModelState struct {
	State    string  `json:"state"` // loading, ready, error or unloaded
	Name     string  `json:"name"`  // the model's folder name, or "Suzuran Tiny"
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

// modelHost owns the engine: it loads it in the background with progress,
// hands it to the window and the API, unloads it after the keep-alive
// time, and reloads it on the next request.
type modelHost struct {
	// gpu configures the GPU self-check and the CPU fallback; recheck
	// makes the next load run the check again (Settings).
	gpu       gpucheck.Options
	recheck   bool
	backend   string
	threads   int
	queue     int
	onChange  func(ModelState)
	keepAlive func() time.Duration
	context   func() int
	parallel  func() int
	// prefix is the engine's prefix store on disk (nil: none).
	prefix *prefixstore.Store

	mu      sync.Mutex
	state   ModelState
	engine  *engine.Engine
	loaded  chan struct{} // closed when the load under way ends
	users   int           // requests running on engine
	idle    *time.Timer
	closed  bool
	loadGen int // counts loads, so that a superseded load discards its engine
}

// load replaces the model with the one in dir (or reloads it).
func (h *modelHost) load(dir string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.dropEngineLocked()
	h.startLoadLocked(dir)
}

func (h *modelHost) startLoadLocked(dir string) {
	h.loadGen++
	gen := h.loadGen
	h.state = ModelState{State: server.StateLoading, Dir: dir, Name: modelName(dir), Demo: isDemo(dir)}
	h.loaded = make(chan struct{})
	h.emitLocked()
	parallel := 0
	if h.parallel != nil {
		parallel = h.parallel()
	}
	opts := engine.LoadOptions{Backend: h.backend, Threads: h.threads, ContextTokens: h.context(), QueueSize: h.queue, Parallel: parallel,
		Store: h.prefix}
	check := h.gpu
	check.Recheck, h.recheck = h.recheck, false
	check.OnCheck = func() { h.setChecking(gen) }
	check.OnFallback = func(r gpucheck.Result) { h.fellBack(gen, r) }
	done := h.loaded
	go func() {
		e, res, err := loadEngine(dir, opts, check,
			func(p float64) { h.setProgress(gen, p) })
		h.mu.Lock()
		defer h.mu.Unlock()
		defer close(done)
		if gen != h.loadGen || h.closed {
			if e != nil {
				go e.Close()
			}
			return
		}
		if err != nil {
			h.state.State, h.state.Error, h.state.Progress = server.StateError, err.Error(), 0
		} else {
			h.engine = e
			h.state.State, h.state.Progress, h.state.Backend = server.StateReady, 1, e.BackendName()
			h.state.Checking, h.state.Fallback = false, res.Message
			h.armIdleLocked()
		}
		h.emitLocked()
	}()
}

func (h *modelHost) setProgress(gen int, p float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.loadGen || h.state.State != server.StateLoading {
		return
	}
	// Whole percents are enough for the tray and the window.
	if int(p*100) == int(h.state.Progress*100) {
		return
	}
	h.state.Progress = p
	h.emitLocked()
}

// setChecking says that the GPU self-check of load gen runs.
func (h *modelHost) setChecking(gen int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.loadGen || h.state.State != server.StateLoading {
		return
	}
	h.state.Checking = true
	h.emitLocked()
}

// fellBack: the engine of load gen moved to the CPU after a GPU failure
// while answering; the window and the tray say so.
func (h *modelHost) fellBack(gen int, r gpucheck.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.loadGen || h.engine == nil {
		return
	}
	h.state.Fallback, h.state.Backend = r.Message, h.engine.BackendName()
	h.emitLocked()
}

// recheckGPU loads the model again with the GPU self-check run anew,
// whatever result is remembered.
func (h *modelHost) recheckGPU() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.recheck = true
	h.dropEngineLocked()
	h.startLoadLocked(h.state.Dir)
}

// loadEngine reads the weights once through the page cache with progress
// (the engine maps them, and on a cold start that read is what takes the
// time), then starts the engine on them: on the GPU once its self-check
// passes, else on the CPU (gpucheck.Load), res saying which and why.
func loadEngine(dir string, opts engine.LoadOptions, check gpucheck.Options, progress func(float64)) (e *engine.Engine, res gpucheck.Result, err error) {
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
			return nil, res, fmt.Errorf("opening %s: %w", name, err)
		}
		for {
			n, err := f.Read(buf)
			done += int64(n)
			if total > 0 {
				progress(0.95 * float64(done) / float64(total))
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return nil, res, fmt.Errorf("reading %s: %w", name, err)
			}
		}
		f.Close()
	}
	e, res, err = gpucheck.Load(dir, opts, check)
	if err != nil {
		return nil, res, err
	}
	if _, err := e.Template(); err != nil {
		e.Close()
		return nil, res, fmt.Errorf("%s cannot chat: %w", dir, err)
	}
	return e, res, nil
}

// acquire waits for the model to be ready (loading it if it was unloaded)
// and holds it until release; the keep-alive clock stops meanwhile.
func (h *modelHost) acquire(ctx context.Context) (*engine.Engine, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, engine.ErrClosed
		}
		switch h.state.State {
		case server.StateReady:
			h.users++
			if h.idle != nil {
				h.idle.Stop()
			}
			e := h.engine
			h.mu.Unlock()
			return e, nil
		case server.StateError:
			err := errors.New(h.state.Error)
			h.mu.Unlock()
			return nil, err
		case server.StateUnloaded:
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

// acquireLoaded is acquire without waiting: the engine when it is loaded
// (release it after), else nil.
func (h *modelHost) acquireLoaded() *engine.Engine {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.state.State != server.StateReady {
		return nil
	}
	h.users++
	if h.idle != nil {
		h.idle.Stop()
	}
	return h.engine
}

func (h *modelHost) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.users--
	h.armIdleLocked()
}

// armIdleLocked (re)starts the keep-alive clock when nothing runs.
func (h *modelHost) armIdleLocked() {
	keep := h.keepAlive()
	if h.idle != nil {
		h.idle.Stop()
	}
	if keep <= 0 || h.users > 0 || h.engine == nil {
		return
	}
	gen := h.loadGen
	h.idle = time.AfterFunc(keep, func() { h.unloadIdle(gen) })
}

func (h *modelHost) unloadIdle(gen int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.loadGen || h.users > 0 || h.state.State != server.StateReady {
		return
	}
	h.dropEngineLocked()
	h.state = ModelState{State: server.StateUnloaded, Dir: h.state.Dir, Name: h.state.Name, Demo: h.state.Demo}
	h.emitLocked()
}

// dropEngineLocked closes the engine in the background: Close waits for
// a running request, and the lock must not.
func (h *modelHost) dropEngineLocked() {
	if h.engine != nil {
		e := h.engine
		h.engine = nil
		go e.Close()
	}
}

func (h *modelHost) snapshot() ModelState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

func (h *modelHost) emitLocked() {
	if h.onChange != nil {
		h.onChange(h.state)
	}
}

func (h *modelHost) close() {
	h.mu.Lock()
	h.closed = true
	e := h.engine
	h.engine = nil
	if h.idle != nil {
		h.idle.Stop()
	}
	h.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// modelName is what the window calls the model in dir.
func modelName(dir string) string {
	if isDemo(dir) {
		return models.DemoName
	}
	// A snapshot in the Hugging Face cache is called by its repository:
	// models--<org>--<name>/snapshots/<commit>.
	if snapshots := filepath.Dir(dir); filepath.Base(snapshots) == "snapshots" {
		if org, name, ok := strings.Cut(strings.TrimPrefix(filepath.Base(filepath.Dir(snapshots)), "models--"), "--"); ok {
			return org + "/" + name
		}
	}
	return filepath.Base(dir)
}

func isDemo(dir string) bool { return filepath.Base(dir) == models.FolderName() }

// serverModels is the service's engine as the API server sees it.
type serverModels struct{ h *modelHost }

// Current returns the engine when it is ready; while it loads (or after
// the keep-alive unloaded it, which starts a reload) the error wraps
// server.ErrLoading.
func (m serverModels) Current(ctx context.Context) (*engine.Engine, string, error) {
	h := m.h
	h.mu.Lock()
	defer h.mu.Unlock()
	switch h.state.State {
	case server.StateReady:
		h.armIdleLocked() // an API request counts as use
		return h.engine, h.state.Name, nil
	case server.StateError:
		return nil, "", fmt.Errorf("the model %s failed to load: %s", h.state.Name, h.state.Error)
	case server.StateUnloaded:
		if !h.closed {
			h.startLoadLocked(h.state.Dir)
		}
	}
	return nil, "", fmt.Errorf("%s (%.0f %%): %w", h.state.Name, 100*h.state.Progress, server.ErrLoading)
}

// ThinkingDefault turns thinking off for API requests that do not say,
// while the model is the demo model, which was trained without thinking.
func (m serverModels) ThinkingDefault() *bool {
	if m.h.snapshot().Demo {
		off := false
		return &off
	}
	return nil
}

func (m serverModels) Status() server.ModelStatus {
	s := m.h.snapshot()
	return server.ModelStatus{State: s.State, Model: s.Name, Dir: s.Dir, Progress: s.Progress, Error: s.Error, Fallback: s.Fallback}
}
