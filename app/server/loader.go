package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
)

// Loader is the Models of `suzuran serve` (and of the tests): it loads one
// model folder once, in the background, and hands out its engine.
type Loader struct {
	dir  string
	opts engine.LoadOptions
	// load is engine.Load; tests may hold it back to see the loading state.
	load func(dir string, opts engine.LoadOptions) (*engine.Engine, error)

	mu     sync.Mutex
	state  string
	engine *engine.Engine
	err    error
	done   chan struct{}
	// check configures the GPU self-check (SetGPUCheck); fallback is the
	// result's words while the model runs on the CPU instead.
	check    gpucheck.Options
	fallback string
}

// NewLoader returns a Loader for the model folder dir; Load starts it.
// A GPU backend is checked first and falls back to the CPU as the
// window's does (engine/gpucheck).
func NewLoader(dir string, opts engine.LoadOptions) *Loader {
	l := &Loader{dir: dir, opts: opts, state: StateUnloaded, done: make(chan struct{})}
	l.load = l.loadChecked
	return l
}

// SetGPUCheck configures the GPU self-check; call it before Load.
func (l *Loader) SetGPUCheck(o gpucheck.Options) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.check = o
}

// loadChecked is gpucheck.Load, noting why the model runs on the CPU.
func (l *Loader) loadChecked(dir string, opts engine.LoadOptions) (*engine.Engine, error) {
	l.mu.Lock()
	o := l.check
	l.mu.Unlock()
	told := o.OnFallback
	o.OnFallback = func(r gpucheck.Result) {
		l.mu.Lock()
		l.fallback = r.Message
		l.mu.Unlock()
		if told != nil {
			told(r)
		}
	}
	e, res, err := gpucheck.Load(dir, opts, o)
	l.mu.Lock()
	l.fallback = res.Message
	l.mu.Unlock()
	return e, err
}

// Load starts loading the model in the background; Wait waits for it.
func (l *Loader) Load() {
	l.mu.Lock()
	if l.state != StateUnloaded {
		l.mu.Unlock()
		return
	}
	l.state = StateLoading
	done := make(chan struct{})
	l.done = done
	l.mu.Unlock()
	go func() {
		e, err := l.load(l.dir, l.opts)
		l.mu.Lock()
		l.engine, l.err = e, err
		l.state = StateReady
		if err != nil {
			l.state = StateError
		}
		l.mu.Unlock()
		close(done)
	}()
}

// Wait blocks until loading ends and returns its error.
func (l *Loader) Wait(ctx context.Context) error {
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	select {
	case <-done:
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Current returns the engine once loaded.
func (l *Loader) Current(ctx context.Context) (*engine.Engine, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case StateReady:
		return l.engine, l.name(), nil
	case StateError:
		return nil, "", fmt.Errorf("the model %s failed to load: %w", l.name(), l.err)
	case StateLoading:
		return nil, "", fmt.Errorf("%s: %w", l.name(), ErrLoading)
	}
	return nil, "", fmt.Errorf("%s: %w", l.name(), errNotLoaded)
}

var errNotLoaded = errors.New("the model is not loaded")

// Status reports the loading state.
func (l *Loader) Status() ModelStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := ModelStatus{State: l.state, Model: l.name(), Dir: l.dir, Fallback: l.fallback}
	switch l.state {
	case StateReady:
		st.Progress = 1
	case StateError:
		st.Error = l.err.Error()
	}
	return st
}

// name is the model's name: its folder's.
func (l *Loader) name() string { return filepath.Base(filepath.Clean(l.dir)) }

// Close unloads the model.
func (l *Loader) Close() error {
	l.mu.Lock()
	e := l.engine
	l.engine, l.state = nil, StateUnloaded
	l.mu.Unlock()
	if e != nil {
		return e.Close()
	}
	return nil
}
