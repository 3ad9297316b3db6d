package engine

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpu"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// LoadOptions choose the backend and the engine's bounds for Load.
type LoadOptions struct {
	// Backend names the backend: "cpu" (the default).
	Backend string
	// Threads for the CPU backend; 0 means GOMAXPROCS.
	Threads int
	// Precision of the CPU backend's products with quantized weights:
	// "fast" (the default), "exact" or "int8" (see cpu.Precision).
	Precision string
	// ContextTokens, QueueSize, CacheBytes and PrefillChunk are as in
	// Options.
	ContextTokens int
	QueueSize     int
	CacheBytes    int64
	PrefillChunk  int
}

// Backends lists the backend names Load accepts: "cpu" (pure Go), "emu"
// (the GPU backend on the host emulator, which compiles the Metal kernels
// as C++ with the system compiler on first use), and any registered with
// RegisterBackend ("metal" on macOS).
func Backends() []string {
	var extra []string
	for name := range extraBackends {
		extra = append(extra, name)
	}
	slices.Sort(extra)
	return append([]string{"cpu", "emu"}, extra...)
}

// BackendFactory makes a backend for loaded weights. GPU backends register
// one with RegisterBackend so that this package need not import them (they
// build only where their device exists).
type BackendFactory func(w *model.Weights, sampler model.Sampler) (model.Backend, error)

var extraBackends = map[string]BackendFactory{}

// RegisterBackend makes a backend available to Load under name. Call it from
// an init function.
func RegisterBackend(name string, f BackendFactory) { extraBackends[name] = f }

// Load opens the model folder dir (config, weights, tokenizer) and starts an
// engine on the chosen backend. Close the engine to unmap the weights.
func Load(dir string, lo LoadOptions) (*Engine, error) {
	m, err := checkpoint.Load(dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		m.Close()
		return nil, err
	}
	// A folder without a chat template still serves token requests (the
	// logits tool, the fixtures); SubmitChat then reports why.
	tmpl, tmplErr := chat.LoadTemplate(dir)
	backend, err := newBackend(lo, m.Weights)
	if err != nil {
		m.Close()
		return nil, err
	}
	e, err := New(Options{
		Backend:       backend,
		Weights:       m.Weights,
		Tokenizer:     tok,
		Template:      tmpl,
		ContextTokens: lo.ContextTokens,
		QueueSize:     lo.QueueSize,
		CacheBytes:    lo.CacheBytes,
		PrefillChunk:  lo.PrefillChunk,
		Pipelined:     lo.Backend != "" && lo.Backend != "cpu",
	})
	if err != nil {
		backend.Close()
		m.Close()
		return nil, err
	}
	e.dir = dir
	e.tmplErr = tmplErr
	e.onClose = append(e.onClose, m.Close)
	return e, nil
}

func newBackend(lo LoadOptions, w *model.Weights) (model.Backend, error) {
	name := lo.Backend
	if name == "" {
		name = "cpu"
	}
	switch name {
	case "cpu":
		return cpu.New(w, cpu.Options{Threads: lo.Threads, Sampler: sample.New(), Precision: cpu.Precision(lo.Precision)})
	case "emu":
		dev, err := emu.New(emu.Options{Threads: lo.Threads})
		if err != nil {
			return nil, fmt.Errorf("emu backend: %w", err)
		}
		b, err := gpu.New(dev, w, gpu.Options{})
		if err != nil {
			dev.Close()
			return nil, err
		}
		return deviceBackend{b, dev}, nil
	}
	if f, ok := extraBackends[name]; ok {
		return f(w, sample.New())
	}
	return nil, fmt.Errorf("unknown backend %q: this build has %s", name, strings.Join(Backends(), ", "))
}

// deviceBackend is a GPU backend with the device it owns: the gpu package
// leaves the device to its creator, and here that is the engine.
type deviceBackend struct {
	model.Backend
	dev io.Closer
}

func (d deviceBackend) Close() error {
	return errors.Join(d.Backend.Close(), d.dev.Close())
}
