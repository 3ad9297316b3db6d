package engine

import (
	"github.com/suzuran-app/suzuran/engine/backends"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/machine"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/prefixstore"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// LoadOptions choose the backend and the engine's bounds for Load.
type LoadOptions struct {
	// Backend names the backend (Backends): "cpu" (the default).
	Backend string
	// Threads for the CPU backend; 0 means GOMAXPROCS.
	Threads int
	// Precision of the CPU backend's products with quantized weights:
	// "fast" (the default), "exact" or "int8" (see cpu.Precision).
	Precision string
	// ContextTokens, QueueSize, CacheBytes and PrefillChunk are as in
	// Options, except that CacheBytes 0 sizes the prefix cache from the
	// machine: CacheBudget of the memory available once the model is
	// mapped.
	ContextTokens int
	QueueSize     int
	CacheBytes    int64
	PrefillChunk  int
	// Parallel is Options.Parallel: how many requests decode together.
	Parallel int
	// Device, when set, is an opened device (backends.OpenDevice) for the
	// GPU backend named by Backend; the engine owns it from then on.
	Device device.Device
	// OnFallback, when set with a GPU backend, moves the engine to the
	// cpu backend (Threads, Precision) when a pass fails on the GPU, and
	// is then told why, on a goroutine of its own (see Options.Fallback).
	OnFallback func(cause error)
	// Store and StoreMinTokens are as in Options; Load names the model
	// for the store's keys (prefixstore.ModelIdentity).
	Store          *prefixstore.Store
	StoreMinTokens int
}

// Backends lists the backend names Load accepts in this build
// (backends.Names: cpu, emu, and metal on macOS).
func Backends() []string { return backends.Names() }

// Load opens the model folder dir (config, weights, tokenizer) and starts an
// engine on the chosen backend. Close the engine to unmap the weights.
func Load(dir string, lo LoadOptions) (*Engine, error) {
	m, err := checkpoint.Load(dir)
	if err != nil {
		if lo.Device != nil {
			lo.Device.Close()
		}
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		m.Close()
		if lo.Device != nil {
			lo.Device.Close()
		}
		return nil, err
	}
	// A folder without a chat template still serves token requests (the
	// logits tool, the fixtures); SubmitChat then reports why.
	tmpl, tmplErr := chat.LoadTemplate(dir)
	backend, err := backends.Open(lo.Backend, m.Weights, backends.Options{Threads: lo.Threads, Precision: cpu.Precision(lo.Precision), Device: lo.Device})
	if err != nil {
		m.Close()
		return nil, err
	}
	var fallback func(error) (model.Backend, error)
	if lo.OnFallback != nil && backend.Device != nil {
		fallback = func(cause error) (model.Backend, error) {
			b, err := backends.Open("cpu", m.Weights, backends.Options{Threads: lo.Threads, Precision: cpu.Precision(lo.Precision)})
			if err != nil {
				return nil, err
			}
			return b.Backend, nil
		}
	}
	cacheBytes := lo.CacheBytes
	if cacheBytes == 0 {
		cacheBytes = CacheBudget(machine.Available(), m.Bytes)
	}
	identity := ""
	if lo.Store != nil {
		// Without an identity the engine keeps its snapshots in memory
		// only: a model it cannot name must not read another's.
		identity, _ = prefixstore.ModelIdentity(dir)
	}
	parallel := lo.Parallel
	if parallel == 0 {
		parallel = backend.Parallel
	}
	// The engine gets the backend itself, so that the optional interfaces it
	// implements (model.SequenceSizer, model.ImageInputs) stay visible; the
	// device, when there is one, closes after it.
	var vision func() (*model.VisionWeights, error)
	if m.Weights.Config.Vision != nil {
		vision = m.Vision
	}
	e, err := New(Options{
		Vision:         vision,
		Backend:        backend.Backend,
		Weights:        m.Weights,
		Tokenizer:      tok,
		Template:       tmpl,
		ContextTokens:  lo.ContextTokens,
		QueueSize:      lo.QueueSize,
		CacheBytes:     cacheBytes,
		PrefillChunk:   lo.PrefillChunk,
		Parallel:       parallel,
		Pipelined:      backend.Async,
		Fallback:       fallback,
		OnFallback:     lo.OnFallback,
		Store:          lo.Store,
		ModelIdentity:  identity,
		StoreMinTokens: lo.StoreMinTokens,
	})
	if err != nil {
		backend.Close()
		m.Close()
		return nil, err
	}
	e.dir = dir
	e.tmplErr = tmplErr
	if backend.Device != nil {
		e.onClose = append(e.onClose, backend.Device.Close)
	}
	e.onClose = append(e.onClose, m.Close)
	return e, nil
}
