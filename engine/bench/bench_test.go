package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

func tinyModel(t *testing.T) *checkpoint.Model {
	t.Helper()
	m, err := checkpoint.Load(fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestSummarize(t *testing.T) {
	cases := []struct {
		in   []float64
		want Stat
	}{
		{[]float64{3, 1, 2}, Stat{Median: 2, Min: 1, Max: 3, N: 3}},
		{[]float64{4, 1, 3, 2}, Stat{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{[]float64{7}, Stat{Median: 7, Min: 7, Max: 7, N: 1}},
	}
	for _, c := range cases {
		if got := Summarize(c.in); got != c.want {
			t.Errorf("Summarize(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
	if s := Summarize(nil); s.N != 0 || !math.IsNaN(s.Median) {
		t.Errorf("Summarize(nil) = %+v, want N 0 and NaN", s)
	}
}

func TestFitPrefixes(t *testing.T) {
	// Times made from known costs are recovered; the tolerance covers
	// float64 rounding in the normal equations only.
	const fixed, dn, att = 5.0, 2.0, 7.0
	var ts []PrefixTime
	for _, k := range [][2]int{{1, 0}, {2, 0}, {3, 0}, {3, 1}} {
		ts = append(ts, PrefixTime{DeltaNet: k[0], Attention: k[1], Ms: fixed + dn*float64(k[0]) + att*float64(k[1])})
	}
	c, err := FitPrefixes(ts, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name      string
		got, want float64
	}{
		{"fixed", c.FixedMs, fixed},
		{"DeltaNet layer", c.DeltaNetLayerMs, dn},
		{"attention layer", c.AttentionLayerMs, att},
		{"projected", c.Projected40Ms, fixed + 30*dn + 10*att},
		{"projected tok/s", c.ProjectedTokPerSec, 4 / ((fixed + 30*dn + 10*att) / 1e3)},
	} {
		if math.Abs(v.got-v.want) > 1e-9*math.Max(1, math.Abs(v.want)) {
			t.Errorf("%s = %v, want %v", v.name, v.got, v.want)
		}
	}
	// Without attention layers the attention cost is 0 and the rest fits.
	c, err = FitPrefixes([]PrefixTime{{1, 0, 7}, {2, 0, 9}}, 1)
	if err != nil || math.Abs(c.FixedMs-5) > 1e-9 || math.Abs(c.DeltaNetLayerMs-2) > 1e-9 || c.AttentionLayerMs != 0 {
		t.Errorf("fit without attention: %+v, %v; want fixed 5, DeltaNet 2, attention 0", c, err)
	}
	// One prefix cannot separate a fixed cost from a layer's.
	if _, err := FitPrefixes([]PrefixTime{{1, 0, 7}}, 1); err == nil {
		t.Error("fitting one prefix succeeded; want an error")
	}
}

// TestBlockCosts checks the per-layer arithmetic on made-up times: two
// prompts, each run through 3 DeltaNet and 1 attention layer (in however
// many chunks), must give costs per prompt and per layer.
func TestBlockCosts(t *testing.T) {
	s := time.Second
	b := BlockTimes{DeltaNet: 3 * s, Attention: 2 * s, MoE: 4 * s, Head: s / 2, Total: 10 * s}
	c := b.Costs(2, 100, 3, 1)
	want := LayerCosts{Method: "blocks", MoEMs: 500, HeadMs: 250, FixedMs: 500,
		DeltaNetLayerMs: 1000, AttentionLayerMs: 1500,
		Projected40Ms: 500 + 30*1000 + 10*1500, ProjectedTokPerSec: 100 / 45.5}
	// The values are exact in binary except the rate, which is compared to
	// a relative 1e-12 (float64 division).
	if math.Abs(c.ProjectedTokPerSec-want.ProjectedTokPerSec) > 1e-12*want.ProjectedTokPerSec {
		t.Errorf("rate %v, want %v", c.ProjectedTokPerSec, want.ProjectedTokPerSec)
	}
	c.ProjectedTokPerSec = want.ProjectedTokPerSec
	if c != want {
		t.Errorf("Costs = %+v\nwant    %+v", c, want)
	}
}

// TestDecodeTraffic counts a hand-built model's bytes.
func TestDecodeTraffic(t *testing.T) {
	mat := func(data, scales, biases, out int) model.Matrix {
		return model.Matrix{Out: out, Data: make([]byte, data), Scales: make([]byte, scales), Biases: make([]byte, biases)}
	}
	cfg := model.Config{LinearKeyHeads: 2, LinearKeyHeadDim: 4, LinearValueHeads: 3, LinearValueHeadDim: 5,
		ConvKernel: 4, NumKVHeads: 2, HeadDim: 8, ExpertsPerToken: 2}
	moe := model.MoE{Router: mat(10, 1, 1, 1), SharedGate: mat(20, 0, 0, 1), SharedUp: mat(20, 0, 0, 1),
		SharedDown: mat(20, 0, 0, 1), SharedExpert: mat(3, 0, 0, 1),
		Gate: model.Experts{mat(100, 0, 0, 1), mat(100, 0, 0, 1), mat(100, 0, 0, 1)},
		Up:   model.Experts{mat(100, 0, 0, 1), mat(100, 0, 0, 1), mat(100, 0, 0, 1)},
		Down: model.Experts{mat(50, 0, 0, 1), mat(50, 0, 0, 1), mat(50, 0, 0, 1)}}
	w := &model.Weights{Config: cfg,
		Embed:     mat(1000, 0, 0, 10), // 100 bytes a row
		LMHead:    mat(2000, 0, 0, 10),
		FinalNorm: make([]float32, 2),
		Layers: []model.Layer{
			{InputNorm: make([]float32, 2), PostNorm: make([]float32, 2), MoE: moe,
				DeltaNet: &model.DeltaNet{QKV: mat(30, 0, 0, 1), Z: mat(30, 0, 0, 1), B: mat(5, 0, 0, 1), A: mat(5, 0, 0, 1),
					Out: mat(30, 0, 0, 1), Conv: [][]float32{make([]float32, 4)}, ALog: make([]float32, 3),
					DtBias: make([]float32, 3), Norm: make([]float32, 5)}},
			{InputNorm: make([]float32, 2), PostNorm: make([]float32, 2), MoE: moe,
				Attention: &model.Attention{Q: mat(40, 0, 0, 1), K: mat(10, 0, 0, 1), V: mat(10, 0, 0, 1), O: mat(40, 0, 0, 1),
					QNorm: make([]float32, 8), KNorm: make([]float32, 8)}},
		},
	}
	tr := DecodeTraffic(w, 10, 2)
	norms := int64(4 * (2 + 2 + 2 + 2 + 2)) // four layer norms and the final norm
	moeBytes := int64(12+20+20+20+3) + 2*(100+100+50)
	dnBytes := int64(30+30+5+5+30) + 4*(4+3+3+5)
	attBytes := int64(40+10+10+40) + 4*(8+8)
	wantWeights := 100 + 2000 + norms + 2*moeBytes + dnBytes + attBytes
	if tr.WeightBytes != wantWeights {
		t.Errorf("WeightBytes = %d, want %d", tr.WeightBytes, wantWeights)
	}
	channels := int64(2*2*4 + 3*5)
	wantState := 2*(3*4*5*4+3*channels*4) + 2*11*2*8*2
	if tr.StateBytes != wantState || tr.TotalBytes != wantWeights+wantState {
		t.Errorf("StateBytes = %d, TotalBytes = %d; want %d and %d", tr.StateBytes, tr.TotalBytes, wantState, wantWeights+wantState)
	}
}

func TestMeasureCopy(t *testing.T) {
	b := MeasureCopy(8<<20, 3, 2)
	if b.Copies != 3 || b.Copy.N != 3 || b.Bytes != 8<<20 {
		t.Fatalf("probe %+v: want 3 copies of 8 MiB", b)
	}
	// Any machine copies faster than 10 MB/s and slower than 10 TB/s.
	if b.GBps < 0.01 || b.GBps > 10000 || b.GBps != b.Copy.Max {
		t.Errorf("copy rate %v GB/s (stat %+v): outside any machine's range or not the best copy", b.GBps, b.Copy)
	}
}

func checkStat(t *testing.T, what string, s Stat, runs int) {
	t.Helper()
	if s.N != runs || !(s.Min > 0) || s.Min > s.Median || s.Median > s.Max || math.IsInf(s.Max, 0) {
		t.Errorf("%s: %+v, want %d positive finite runs with min ≤ median ≤ max", what, s, runs)
	}
}

// TestRunOnTinyModel runs the whole benchmark on the CPU backend over the
// tiny fixture with both per-layer methods.
func TestRunOnTinyModel(t *testing.T) {
	m := tinyModel(t)
	for _, method := range []string{"blocks", "prefixes"} {
		t.Run(method, func(t *testing.T) { runTinyMethod(t, m, method) })
	}
}

// runTinyMethod is one per-layer method of TestRunOnTinyModel.
func runTinyMethod(t *testing.T, m *checkpoint.Model, method string) {
	tg, closeFn, err := Open("cpu", m, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	s := Settings{Prompts: []int{16, 40}, Gen: 3, Runs: 2, LongRuns: 1, LongPrompt: 20, Warmup: 8, Chunk: 16,
		CopyBytes: 4 << 20, Copies: 2, LayerCosts: method, PrefixPrompt: 16, PrefixGen: 2}
	var log bytes.Buffer
	r, err := Run(tg, s, &log)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Weights.Layers) != 4 {
		t.Fatalf("the model has %d layers after the run, want its 4 back", len(m.Weights.Layers))
	}
	if r.Kind != "cpu" || r.Model.Layers != 4 || r.Model.DeltaNetLayers != 3 || r.Model.AttentionLayers != 1 || r.Model.Bits != 4 {
		t.Errorf("report header: kind %q, model %+v", r.Kind, r.Model)
	}
	if k := r.Kernels; k == nil || k.ISA != cpu.ISAs()[0] || k.Precision != cpu.PrecisionFast {
		t.Errorf("report kernels %+v: want the best instruction set (%s) and the fast precision", k, cpu.ISAs()[0])
	}
	if r.Machine.Cores < 1 || r.Commit.Revision == "" {
		t.Errorf("machine %+v, commit %+v: want cores and a revision", r.Machine, r.Commit)
	}
	if len(r.Prefill) != 2 || len(r.Decode) != 2 {
		t.Fatalf("%d prefill and %d decode results, want 2 each", len(r.Prefill), len(r.Decode))
	}
	for i, runs := range []int{2, 1} { // the 40-token prompt is over LongPrompt
		checkStat(t, "TTFT", r.Prefill[i].TTFT, runs)
		checkStat(t, "prefill tok/s", r.Prefill[i].TokPerSec, runs)
		checkStat(t, "decode tok/s", r.Decode[i].TokPerSec, runs)
		checkStat(t, "decode ms/token", r.Decode[i].MsPerToken, runs)
		// CPU time can read 0 for the tiny model's short passes
		// (rusage counts in scheduler ticks on some kernels), so
		// only its presence and sign are checked.
		if c := r.Prefill[i].CPUSeconds; c.N != runs || c.Min < 0 {
			t.Errorf("prefill CPU seconds %+v, want %d non-negative runs", c, runs)
		}
		if c := r.Decode[i].CPUSeconds; c.N != runs || c.Min < 0 {
			t.Errorf("decode CPU seconds %+v, want %d non-negative runs", c, runs)
		}
		if d := r.Decode[i]; d.Context != s.Prompts[i] || d.Tokens != 3 || d.Traffic.TotalBytes <= 0 || !(d.AchievedGBps > 0) || !(d.BandwidthFraction > 0) {
			t.Errorf("decode after %d: %+v", s.Prompts[i], d)
		}
	}
	if r.Bandwidth.GBps <= 0 {
		t.Errorf("bandwidth %+v", r.Bandwidth)
	}
	if method == "blocks" {
		for _, c := range []*LayerCosts{r.Prefill[0].Layers, r.Prefill[1].Layers, r.Decode[0].Layers, r.Decode[1].Layers} {
			if c == nil || c.Method != "blocks" || !(c.DeltaNetLayerMs > 0) || !(c.AttentionLayerMs > 0) || !(c.ProjectedTokPerSec > 0) {
				t.Errorf("block costs %+v: want positive layer costs and a projection", c)
			}
		}
	} else {
		dec := r.PrefixTimes["decode"]
		want := []PrefixTime{{DeltaNet: 1}, {DeltaNet: 2}, {DeltaNet: 3}, {DeltaNet: 3, Attention: 1}}
		if len(dec) != len(want) {
			t.Fatalf("prefix times %+v, want 4 prefixes", dec)
		}
		for i := range want {
			if dec[i].DeltaNet != want[i].DeltaNet || dec[i].Attention != want[i].Attention || !(dec[i].Ms > 0) {
				t.Errorf("prefix %d: %+v, want %d DeltaNet and %d attention layers with a time", i, dec[i], want[i].DeltaNet, want[i].Attention)
			}
		}
		if c := r.Prefill[0].Layers; c == nil || c.Method != "prefixes" {
			t.Errorf("prefill 16 layer costs %+v: want the prefix fit", c)
		}
		if c := r.Decode[0].Layers; c == nil || c.Method != "prefixes" {
			t.Errorf("decode after 16 layer costs %+v: want the prefix fit", c)
		}
	}

	checkTinyTable(t, r, method)
}

// checkTinyTable checks that the report survives JSON and renders as a table.
func checkTinyTable(t *testing.T, r *Report, method string) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var tab bytes.Buffer
	if err := Table(&tab, []*Report{&back, r}); err != nil {
		t.Fatal(err)
	}
	if method == "blocks" {
		// Each block kind per prompt token: the layer's time less
		// its MoE, the MoE, over the 40 tokens.
		c := r.Prefill[1].Layers
		cells := ms((c.DeltaNetLayerMs-c.MoEMs)*1e3/40) + " / " + ms(c.MoEMs*1e3/40) + " / " + ms((c.AttentionLayerMs-c.MoEMs)*1e3/40)
		found := false
		for _, line := range strings.Split(tab.String(), "\n") {
			if strings.Contains(line, "prefill 40: DeltaNet mixer / MoE / attention mixer, µs per token") && strings.Contains(line, cells) {
				found = true
			}
		}
		if !found {
			t.Errorf("table lacks the per-token block times of the 40-token prompt (%s):\n%s", cells, tab.String())
		}
	}
	for _, want := range []string{"prefill 16: tok/s", "decode after 40: tok/s", "projected to 40 layers", "copy probe"} {
		if !strings.Contains(strings.ToLower(tab.String()), strings.ToLower(want)) {
			t.Errorf("table lacks %q:\n%s", want, tab.String())
		}
	}
}

func TestOpenUnknownBackend(t *testing.T) {
	m := tinyModel(t)
	if _, _, err := Open("abacus", m, 1); err == nil || !strings.Contains(err.Error(), "cpu") {
		t.Errorf("Open(abacus): %v, want an error listing the backends", err)
	}
}

// TestEnsureSynthetic builds a small synthetic checkpoint (the tiny
// fixture's config cut to 2 layers) once, reuses it, and loads it.
func TestEnsureSynthetic(t *testing.T) {
	cache := t.TempDir()
	o := Synthetic{
		ConfigPath: fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit", "config.json"),
		Layers:     2, Seed: 3, CacheDir: cache,
	}
	dir, built, err := EnsureSynthetic(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !built {
		t.Error("first EnsureSynthetic did not build")
	}
	again, built, err := EnsureSynthetic(o, nil)
	if err != nil || built || again != dir {
		t.Errorf("second EnsureSynthetic: %q, built %v, %v; want the cached %q", again, built, err, dir)
	}
	o.Seed = 4
	other, _, err := EnsureSynthetic(o, nil)
	if err != nil || other == dir {
		t.Errorf("another seed gave %q (%v); want a different folder than %q", other, err, dir)
	}
	m, err := checkpoint.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if n := len(m.Weights.Layers); n != 2 {
		t.Errorf("synthetic checkpoint has %d layers, want 2", n)
	}
}

// checkPipelineCounters checks the per-step counters of a GPU backend's
// report against the pipeline rules: one command buffer per decode token and
// per prefill chunk, at most one host wait, no readback inside a step. It
// returns the counters by "phase: name" for further checks.
func checkPipelineCounters(t *testing.T, r *Report) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, c := range r.Counters {
		got[c.Phase+": "+c.Name] = c.Value
	}
	for name, want := range map[string]float64{
		"decode: command buffers per token":     1,
		"decode: host waits per token":          1,
		"decode: mid-step readbacks per token":  0,
		"prefill: command buffers per chunk":    1,
		"prefill: mid-step readbacks per chunk": 0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	return got
}

// TestEmuCounters measures the GPU backend on the emulator with a short
// prompt and checks the per-step counters the report carries and the prefix
// runs; the timings of emu are not GPU speed and are not checked beyond
// being positive.
func TestEmuCounters(t *testing.T) {
	m := tinyModel(t)
	tg, closeFn, err := Open("emu", m, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	// The prefix runs are the per-layer method of the GPU backends (metal
	// on a Mac): they must work on the GPU backend, whose passes only
	// record, with the model cut to its first n layers.
	r, err := Run(tg, Settings{Prompts: []int{5}, Gen: 3, Runs: 1, Warmup: 2, CopyBytes: 1 << 20, Copies: 1,
		LayerCosts: "prefixes", PrefixPrompt: 5, PrefixGen: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.PrefixTimes["decode"]); n != 4 || len(m.Weights.Layers) != 4 {
		t.Errorf("%d decode prefix times and %d layers after the run, want 4 and 4", n, len(m.Weights.Layers))
	}
	if r.Decode[0].Layers == nil || r.Decode[0].Layers.Method != "prefixes" {
		t.Errorf("decode layer costs %+v, want the prefix fit", r.Decode[0].Layers)
	}
	checkStat(t, "emu decode tok/s", r.Decode[0].TokPerSec, 1)
	got := checkPipelineCounters(t, r)
	if got["decode: planned bytes per token"] <= 0 || got["decode: minimum bytes per token"] <= 0 {
		t.Errorf("planned and minimum bytes per decode token missing: %v", got)
	}
	if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "not GPU speed") {
		t.Errorf("notes %q: want the warning that emu timings are not GPU speed", r.Notes)
	}
}

// TestMeasureDeviceCopy runs the device copy probe on the emulator: the
// copy is checked inside the probe, and the rate must be positive (the
// emulator's rate says nothing about a GPU).
func TestMeasureDeviceCopy(t *testing.T) {
	dev, err := emu.New(emu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	b, err := MeasureDeviceCopy(dev, 256<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	if b.Copies != 2 || b.Copy.N != 2 || b.Bytes != 256<<10 || !(b.GBps > 0) || !strings.Contains(b.Method, "copy_f32") {
		t.Errorf("device probe %+v", b)
	}
	if _, err := MeasureDeviceCopy(dev, 2, 1); err == nil {
		t.Error("a device copy of 2 bytes succeeded; want an error")
	}
}
