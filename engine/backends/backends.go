// Package backends opens the model's backends by name: "cpu" (pure Go),
// "emu" (the GPU backend on the host emulator, which compiles the Metal
// kernels as C++ with the system compiler on first use) and, on macOS,
// "metal"; elsewhere "cuda" where an NVIDIA GPU, its driver and NVRTC are
// found at run time. It is the one place that knows which device a backend runs on:
// Open opens the device, and the returned Backend's Close closes it after
// the backend. It also says how each backend runs its passes, so that the
// engine drives a backend by what it is (asynchronous or not, how many
// sequences it decodes together) rather than by its name.
package backends

import (
	"errors"
	"fmt"
	"strings"

	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpu"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// Options configure Open. The zero value works.
type Options struct {
	// Threads is the number of CPU threads of the cpu backend and of the
	// emulator; 0 means GOMAXPROCS. The metal backend ignores it.
	Threads int
	// Sampler chooses tokens on the host; nil means engine/sample's rule.
	Sampler model.Sampler
	// KVCacheF32 keeps a GPU backend's KV cache in f32 instead of bf16
	// (twice the memory, no rounding of cached keys and values), so that
	// its logits can be held to f32 tolerances; the cpu backend's cache is
	// f32 always.
	KVCacheF32 bool
	// Precision and ISA choose the cpu backend's kernels ("": fast and the
	// best instruction set this machine runs); see cpu.Options.
	Precision cpu.Precision
	ISA       cpu.ISA
	// Device, when set, is an opened device for a GPU backend (one
	// OpenDevice made): Open runs on it instead of opening its own, and
	// owns it from then on, closing it also when Open fails.
	Device device.Device
}

// Backend is an opened backend with what a caller needs to drive it. Its
// Close closes the backend, then the device it runs on.
type Backend struct {
	model.Backend
	// Kind is the name it was opened by: "cpu", "emu" or "metal".
	Kind string
	// Async says that a pass's work runs after Submit returns (a GPU
	// command buffer): starting the next decode step before waiting on
	// this one keeps the device busy while the host reads the token. A
	// synchronous backend (cpu) has finished the work when Submit returns,
	// so starting a step early would only compute one step too many.
	Async bool
	// Parallel is the number of sequences this backend should decode in one
	// batched step unless the user chooses otherwise: 4 on a GPU, whose
	// decode step is bound by reading the weights, so that four sequences
	// cost little more than one; 2 on cpu, whose step is also bound by
	// arithmetic on few cores. Load uses it when LoadOptions.Parallel is 0.
	Parallel int
	// Emulated says the device is the host emulator (emu): its timings are
	// CPU timings, its counters those of the GPU pipeline.
	Emulated bool
	// GPU is the GPU backend, for its counters (Stats); nil for cpu.
	GPU *gpu.Backend
	// Device is the device a GPU backend runs on; nil for cpu.
	Device device.Device
}

// Close closes the backend, then its device.
func (b *Backend) Close() error {
	err := b.Backend.Close()
	if b.Device != nil {
		err = errors.Join(err, b.Device.Close())
	}
	return err
}

// kind is one backend this build can open.
type kind struct {
	name     string
	emulated bool
	// openDevice opens the GPU device; nil for the cpu backend.
	openDevice func(opt Options) (device.Device, error)
}

// kinds lists the backends of this build in the order Names gives them:
// cpu, emu, then the platform's own (platformKinds).
func kinds() []kind {
	return append([]kind{
		{name: "cpu"},
		{name: "emu", emulated: true, openDevice: func(opt Options) (device.Device, error) {
			return emu.New(emu.Options{Threads: opt.Threads})
		}},
	}, platformKinds()...)
}

// Unavailable says why the backend called name, which this platform knows,
// cannot run on this machine ("cuda" without an NVIDIA driver, NVRTC or
// GPU), or nil.
func Unavailable(name string) error { return unavailable(name) }

// Names lists the backend names Open accepts in this build.
func Names() []string {
	var names []string
	for _, k := range kinds() {
		names = append(names, k.name)
	}
	return names
}

// Open makes the backend called name ("" means "cpu") for w, opening its
// device. When Open fails, nothing stays open.
func Open(name string, w *model.Weights, opt Options) (*Backend, error) {
	if name == "" {
		name = "cpu"
	}
	sampler := opt.Sampler
	if sampler == nil {
		sampler = sample.New()
	}
	for _, k := range kinds() {
		if k.name != name {
			continue
		}
		if k.openDevice == nil {
			b, err := cpu.New(w, cpu.Options{Threads: opt.Threads, Sampler: sampler, Precision: opt.Precision, ISA: opt.ISA})
			if err != nil {
				return nil, err
			}
			return &Backend{Backend: b, Kind: name, Parallel: 2}, nil
		}
		dev := opt.Device
		if dev == nil {
			var err error
			if dev, err = k.openDevice(opt); err != nil {
				return nil, fmt.Errorf("%s backend: %w", name, err)
			}
		}
		b, err := gpu.New(dev, w, gpu.Options{KVCacheF32: opt.KVCacheF32, Sampler: sampler})
		if err != nil {
			dev.Close()
			return nil, fmt.Errorf("%s backend: %w", name, err)
		}
		return &Backend{Backend: b, Kind: name, Async: true, Parallel: 4, Emulated: k.emulated, GPU: b, Device: dev}, nil
	}
	if opt.Device != nil {
		opt.Device.Close()
	}
	if err := unavailable(name); err != nil {
		return nil, fmt.Errorf("backend %q cannot run here: %w", name, err)
	}
	return nil, fmt.Errorf("unknown backend %q: this build has %s", name, strings.Join(Names(), ", "))
}

// OpenDevice opens the device the GPU backend called name runs on ("emu",
// or "metal" on macOS), for a caller that checks it before Open runs the
// model on it (Options.Device). The cpu backend has no device: an error.
func OpenDevice(name string, opt Options) (device.Device, error) {
	for _, k := range kinds() {
		if k.name != name {
			continue
		}
		if k.openDevice == nil {
			return nil, fmt.Errorf("the %s backend runs on no GPU device", name)
		}
		dev, err := k.openDevice(opt)
		if err != nil {
			return nil, fmt.Errorf("%s backend: %w", name, err)
		}
		return dev, nil
	}
	return nil, fmt.Errorf("unknown backend %q: this build has %s", name, strings.Join(Names(), ", "))
}
