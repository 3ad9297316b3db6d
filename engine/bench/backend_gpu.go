package bench

import (
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/gpu"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
)

func init() {
	openers["emu"] = func(m *checkpoint.Model, threads int) (Target, func() error, error) {
		dev, err := emu.New(emu.Options{Threads: threads})
		if err != nil {
			return Target{}, nil, err
		}
		t, closeFn, err := gpuTarget("emu", dev, m)
		if err != nil {
			return Target{}, nil, err
		}
		t.Notes = append(t.Notes, "emu runs the GPU kernels as C++ on CPU threads to check them: its timings are not GPU speed; its counters are the GPU pipeline's")
		return t, closeFn, nil
	}
}

// gpuTarget makes the GPU backend over dev. The backend keeps the KV cache
// in bf16, and its counters are reported per decode token and per prefill
// chunk.
func gpuTarget(kind string, dev device.Device, m *checkpoint.Model) (Target, func() error, error) {
	b, err := gpu.New(dev, m.Weights, gpu.Options{})
	if err != nil {
		dev.Close()
		return Target{}, nil, err
	}
	closeFn := func() error {
		err := b.Close()
		if derr := dev.Close(); err == nil {
			err = derr
		}
		return err
	}
	return Target{Kind: kind, Backend: b, Weights: m.Weights, KVElemBytes: 2,
		Counters: func() []Counter { return gpuCounters(b.Stats()) }}, closeFn, nil
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
