package bench

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/backends"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpu"
)

// Kinds lists the backend kinds Open accepts in this build
// (backends.Names).
func Kinds() []string { return backends.Names() }

// Open makes a Target of the named backend kind ("cpu", "emu", "metal")
// over a loaded checkpoint. threads applies to the CPU backend. Call the
// returned function when done, before closing the checkpoint.
func Open(kind string, m *checkpoint.Model, threads int) (Target, func() error, error) {
	return OpenWith(kind, m, OpenOptions{Threads: threads})
}

// OpenOptions configure the backend OpenWith makes.
type OpenOptions struct {
	// Threads for the cpu backend and the emulator; 0 means all cores.
	Threads int
	// Precision and ISA choose the cpu backend's kernels ("": its
	// defaults, fast and the best this machine has); only the cpu backend
	// takes them.
	Precision cpu.Precision
	ISA       cpu.ISA
}

// OpenWith is Open with the cpu backend's precision and instruction set.
func OpenWith(kind string, m *checkpoint.Model, o OpenOptions) (Target, func() error, error) {
	if kind != "cpu" && (o.Precision != "" || o.ISA != "") {
		return Target{}, nil, fmt.Errorf("bench: the %s backend has no precision or instruction-set choice (the cpu backend does)", kind)
	}
	b, err := backends.Open(kind, m.Weights, backends.Options{Threads: o.Threads, Precision: o.Precision, ISA: o.ISA})
	if err != nil {
		return Target{}, nil, fmt.Errorf("bench: %w", err)
	}
	// The backend itself, not the wrapper, so that the optional interfaces
	// it implements stay visible.
	t := Target{Kind: kind, Backend: b.Backend, Weights: m.Weights, KVElemBytes: 4}
	if c, ok := b.Backend.(*cpu.Backend); ok {
		k := c.Kernels()
		t.Kernels = &k
	}
	if g := b.GPU; g != nil {
		// The GPU backend keeps the KV cache in bf16; its counters are
		// reported per decode token and per prefill chunk.
		t.KVElemBytes = 2
		t.Counters = func() []Counter { return gpuCounters(g.Stats()) }
		if b.Emulated {
			t.Notes = append(t.Notes, "emu runs the GPU kernels as C++ on CPU threads to check them: its timings are not GPU speed; its counters are the GPU pipeline's")
		} else {
			t.Device = b.Device
		}
	}
	info := Describe(m.Weights)
	info.Dir = m.Dir
	info.Layout = m.Layout.String()
	info.FileBytes = m.Bytes
	t.Model = info
	return t, b.Close, nil
}

// gpuCounters turns the backend's cumulative counters into per-step values.
func gpuCounters(s gpu.Stats) []Counter {
	var out []Counter
	per := func(phase, name string, v, n int64) {
		if n > 0 {
			out = append(out, Counter{Phase: phase, Name: name, Value: float64(v) / float64(n)})
		}
	}
	d := s.Decode
	per("decode", "command buffers per token", d.CommandBuffers, d.Passes)
	per("decode", "host waits per token", d.HostWaits, d.Passes)
	per("decode", "mid-step readbacks per token", d.MidStepReadbacks, d.Passes)
	per("decode", "dispatches per token", d.Dispatches, d.Passes)
	per("decode", "planned bytes per token", d.ReadBytes+d.WriteBytes, d.Passes)
	per("decode", "minimum bytes per token", d.MinimumBytes, d.Passes)
	if d.MinimumBytes > 0 {
		out = append(out, Counter{Phase: "decode", Name: "planned / minimum bytes",
			Value: float64(d.ReadBytes+d.WriteBytes) / float64(d.MinimumBytes)})
	}
	p := s.Prefill
	per("prefill", "command buffers per chunk", p.CommandBuffers, p.Passes)
	per("prefill", "host waits per chunk", p.HostWaits, p.Passes)
	per("prefill", "mid-step readbacks per chunk", p.MidStepReadbacks, p.Passes)
	per("prefill", "dispatches per chunk", p.Dispatches, p.Passes)
	per("prefill", "planned bytes per token", p.ReadBytes+p.WriteBytes, p.Tokens)
	return out
}
