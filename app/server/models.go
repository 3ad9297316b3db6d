package server

import (
	"context"
	"errors"

	"github.com/suzuran-app/suzuran/engine"
)

// Models is what the server needs from whoever owns the engine: the app's
// service, or serve's loader.
type Models interface {
	// Current returns the engine to run a request on and the model's name.
	// While the model loads it returns an error wrapping ErrLoading (the
	// server answers 503 with the progress from Status).
	Current(ctx context.Context) (*engine.Engine, string, error)
	Status() ModelStatus
}

// ModelStatus is the model's state as /health reports it.
type ModelStatus struct {
	State    string // "loading", "ready", "error" or "unloaded"
	Model    string // the model's name (its folder's name)
	Dir      string
	Progress float64 // 0..1 while loading
	Error    string  // why, when State is "error"
	// Fallback says in words why the model runs on the CPU although a GPU
	// backend was asked for (engine/gpucheck); "" otherwise.
	Fallback string
}

// Model states.
const (
	StateLoading  = "loading"
	StateReady    = "ready"
	StateError    = "error"
	StateUnloaded = "unloaded"
)

// ErrLoading is wrapped by Models.Current while the model loads.
var ErrLoading = errors.New("the model is loading")

// ThinkingDefaulter is implemented by Models whose default for thinking
// follows the model loaded (the app's service turns it off for the demo
// model); it takes the place of Config.ThinkingDefault.
type ThinkingDefaulter interface {
	ThinkingDefault() *bool
}

// thinkingDefault is whether a request that does not say thinks.
func (s *Server) thinkingDefault() *bool {
	if d, ok := s.cfg.Models.(ThinkingDefaulter); ok {
		return d.ThinkingDefault()
	}
	return s.cfg.ThinkingDefault
}
