package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/machine"
	"github.com/suzuran-app/suzuran/engine/model"
)

// Settings say what Run measures. The zero value of a field means its
// default.
type Settings struct {
	// Prompts are the prefill lengths measured (default 512 and 4096). Each
	// prefill run is followed by Gen decode steps: decode at that context.
	Prompts []int `json:"prompts"`
	// Gen is the number of decode steps per run (default 128).
	Gen int `json:"gen"`
	// Runs per prompt length (default 3); the median, minimum and maximum
	// are reported.
	Runs int `json:"runs"`
	// LongRuns, when set, replaces Runs for prompts longer than LongPrompt
	// tokens, whose prefill can take minutes on a CPU.
	LongRuns   int `json:"long_runs,omitempty"`
	LongPrompt int `json:"long_prompt"`
	// Chunk is the prefill chunk length (0: the whole prompt in one pass).
	Chunk int `json:"chunk"`
	// Warmup is the prompt length of the untimed warm-up pass (default 32),
	// which is followed by two decode steps.
	Warmup int `json:"warmup"`
	// CopyBytes and Copies size the bandwidth probe (default 1 GiB, 4).
	CopyBytes int64 `json:"copy_bytes"`
	Copies    int   `json:"copies"`
	// Seed draws the prompt token ids.
	Seed uint64 `json:"seed"`
	// LayerCosts is "blocks", "prefixes" or "off"; empty chooses by
	// backend: blocks for cpu, prefixes for GPU backends.
	LayerCosts string `json:"layer_costs"`
	// PrefixPrompt and PrefixGen size the prefix runs (default 512, 16).
	PrefixPrompt int `json:"prefix_prompt,omitempty"`
	PrefixGen    int `json:"prefix_gen,omitempty"`
	// Threads is the number of goroutines the bandwidth probe copies with
	// (default: GOMAXPROCS).
	Threads int `json:"threads"`
}

func (s *Settings) fill() {
	if len(s.Prompts) == 0 {
		s.Prompts = []int{512, 4096}
	}
	if s.Gen <= 0 {
		s.Gen = 128
	}
	if s.Runs <= 0 {
		s.Runs = 3
	}
	if s.LongPrompt <= 0 {
		s.LongPrompt = 1024
	}
	if s.Warmup <= 0 {
		s.Warmup = 32
	}
	if s.CopyBytes <= 0 {
		s.CopyBytes = 1 << 30
	}
	if s.Copies <= 0 {
		s.Copies = 4
	}
	if s.PrefixPrompt <= 0 {
		s.PrefixPrompt = 512
	}
	if s.PrefixGen <= 0 {
		s.PrefixGen = 16
	}
	if s.Threads <= 0 {
		s.Threads = runtime.GOMAXPROCS(0)
	}
}

// Target is what Run measures: a backend over loaded weights.
type Target struct {
	// Kind is the backend's kind: "cpu", "emu" or "metal".
	Kind    string
	Backend model.Backend
	Weights *model.Weights
	// Model describes the checkpoint for the report.
	Model ModelInfo
	// KVElemBytes is the size of one KV-cache element (4 for cpu, 2 for
	// the GPU's bf16 cache); 0 means 4.
	KVElemBytes int
	// Counters, when set, returns the backend's per-step counters
	// (GPU backends): read after the timed runs.
	Counters func() []Counter
	// Device, when set, is the GPU the backend runs on: the bandwidth
	// probe then also copies on the device, and the achieved fraction is
	// taken of that rate (a GPU reads memory faster than the CPU cores can).
	Device device.Device
	// Notes are printed with the results (for emu: its timings are not GPU
	// speed).
	Notes []string
	// Kernels, for the cpu backend, says which kernels run.
	Kernels *cpu.KernelInfo
}

// ModelInfo describes the checkpoint measured.
type ModelInfo struct {
	Dir             string `json:"dir"`
	Layout          string `json:"layout"`
	Layers          int    `json:"layers"`
	DeltaNetLayers  int    `json:"deltanet_layers"`
	AttentionLayers int    `json:"attention_layers"`
	Hidden          int    `json:"hidden"`
	Vocab           int    `json:"vocab"`
	Experts         int    `json:"experts"`
	ExpertsPerToken int    `json:"experts_per_token"`
	Bits            int    `json:"bits,omitempty"` // affine quantization, 0 for float weights
	FileBytes       int64  `json:"file_bytes"`
	Synthetic       bool   `json:"synthetic"`
}

// Describe fills the shape fields of ModelInfo from w.
func Describe(w *model.Weights) ModelInfo {
	c := &w.Config
	m := ModelInfo{Layers: len(w.Layers), Hidden: c.HiddenSize, Vocab: c.VocabSize,
		Experts: c.NumExperts, ExpertsPerToken: c.ExpertsPerToken}
	for _, l := range w.Layers {
		if l.DeltaNet != nil {
			m.DeltaNetLayers++
		} else {
			m.AttentionLayers++
		}
	}
	if c.Quantization != nil {
		m.Bits = c.Quantization.Bits
	}
	return m
}

// Counter is one per-step counter of a GPU backend, for example phase
// "decode", name "command buffers per token", value 1.
type Counter struct {
	Phase string  `json:"phase"`
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// PrefillResult is the prefill of one prompt length.
type PrefillResult struct {
	Tokens int `json:"tokens"`
	// TTFT is the time to first token, in seconds: the whole prefill, the
	// head of the last row and the sampling of the first new token.
	TTFT      Stat `json:"ttft_s"`
	TokPerSec Stat `json:"tok_per_s"`
	// CPUSeconds is the process's CPU time (user + system, all threads)
	// during the prefill: on a shared machine, the work done whatever the
	// waiting for a core.
	CPUSeconds Stat        `json:"cpu_s"`
	Layers     *LayerCosts `json:"layers,omitempty"`
}

// DecodeResult is decoding after a prompt of Context tokens.
type DecodeResult struct {
	Context    int  `json:"context"`
	Tokens     int  `json:"tokens"`
	TokPerSec  Stat `json:"tok_per_s"`
	MsPerToken Stat `json:"ms_per_token"`
	// CPUSeconds is the process's CPU time during the decode steps.
	CPUSeconds Stat `json:"cpu_s"`
	// Traffic is what one step must move at this context; AchievedGBps is
	// Traffic.TotalBytes at the median rate, and BandwidthFraction that over
	// the copy probe's rate.
	Traffic           Traffic     `json:"traffic"`
	AchievedGBps      float64     `json:"achieved_gbps"`
	BandwidthFraction float64     `json:"bandwidth_fraction"`
	Layers            *LayerCosts `json:"layers,omitempty"`
}

// Report is one benchmark run of one backend.
type Report struct {
	Started   time.Time       `json:"started"`
	Seconds   float64         `json:"seconds"`
	Machine   Machine         `json:"machine"`
	Commit    Commit          `json:"commit"`
	Settings  Settings        `json:"settings"`
	Kind      string          `json:"kind"`
	Backend   string          `json:"backend"`
	Kernels   *cpu.KernelInfo `json:"kernels,omitempty"` // cpu: instruction set and precision
	Model     ModelInfo       `json:"model"`
	Prefill   []PrefillResult `json:"prefill"`
	Decode    []DecodeResult  `json:"decode"`
	PeakRSS   int64           `json:"peak_rss_bytes"`
	Bandwidth Bandwidth       `json:"bandwidth"`
	// DeviceBandwidth is the device copy probe of GPU targets.
	DeviceBandwidth *Bandwidth `json:"device_bandwidth,omitempty"`
	Counters        []Counter  `json:"counters,omitempty"`
	// PrefixTimes are the raw measurements behind a "prefixes" fit.
	PrefixTimes map[string][]PrefixTime `json:"prefix_times,omitempty"`
	Notes       []string                `json:"notes,omitempty"`
}

// Run measures t. Progress lines go to log (nil: none).
func Run(t Target, s Settings, log io.Writer) (*Report, error) {
	s.fill()
	if log == nil {
		log = io.Discard
	}
	if s.LayerCosts == "" {
		s.LayerCosts = "prefixes"
		if t.Kind == "cpu" {
			s.LayerCosts = "blocks"
		}
	}
	if t.KVElemBytes == 0 {
		t.KVElemBytes = 4
	}
	started := time.Now()
	r := &Report{
		Started:  started.UTC(),
		Machine:  DescribeMachine(),
		Commit:   CurrentCommit(),
		Settings: s,
		Kind:     t.Kind,
		Backend:  t.Backend.Name(),
		Kernels:  t.Kernels,
		Model:    t.Model,
		Notes:    append([]string(nil), t.Notes...),
	}
	for _, p := range s.Prompts {
		if p < 1 {
			return nil, fmt.Errorf("bench: prompt length %d: must be at least 1", p)
		}
	}
	m := &measurer{t: t, s: s, log: log, greedy: &model.Sampling{}}

	fmt.Fprintf(log, "%s: warm-up (%d-token prompt, 2 decode steps)\n", t.Kind, s.Warmup)
	if _, _, err := m.run(s.Warmup, 2, 1000, nil, nil); err != nil {
		return nil, fmt.Errorf("bench: warm-up: %w", err)
	}

	for _, p := range s.Prompts {
		pr, dr, err := m.prompt(p)
		if err != nil {
			return nil, err
		}
		r.Prefill = append(r.Prefill, pr)
		r.Decode = append(r.Decode, dr)
	}

	if s.LayerCosts == "prefixes" {
		if err := m.prefixes(r); err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("per-layer costs not measured: %v", err))
		}
	}
	if t.Counters != nil {
		r.Counters = t.Counters()
	}

	// The probe's buffers would raise the peak: read it first.
	r.PeakRSS = machine.PeakRSS()
	m.bandwidth(r)
	r.Machine.LoadEnd = machine.LoadAverage()
	r.Seconds = time.Since(started).Seconds()
	return r, nil
}

// prompt measures s.Runs (or s.LongRuns) prefills of a p-token prompt,
// each followed by s.Gen decode steps.
func (m *measurer) prompt(p int) (PrefillResult, DecodeResult, error) {
	t, s := m.t, m.s
	runs := s.Runs
	if p > s.LongPrompt && s.LongRuns > 0 {
		runs = s.LongRuns
	}
	var ttft, prefillRate, decodeRate, msPerToken, preCPU, decCPU []float64
	var pre, dec *BlockTimes
	if s.LayerCosts == "blocks" {
		pre, dec = &BlockTimes{}, &BlockTimes{}
	}
	for i := range runs {
		cpu0 := processCPUTime()
		pt, dt, err := m.run(p, s.Gen, uint64(i), pre, dec)
		if err != nil {
			return PrefillResult{}, DecodeResult{}, fmt.Errorf("bench: %d-token prompt, run %d: %w", p, i+1, err)
		}
		preCPU = append(preCPU, m.prefillCPU.Seconds())
		decCPU = append(decCPU, (processCPUTime() - cpu0 - m.prefillCPU).Seconds())
		ttft = append(ttft, pt.Seconds())
		prefillRate = append(prefillRate, float64(p)/pt.Seconds())
		decodeRate = append(decodeRate, float64(s.Gen)/dt.Seconds())
		msPerToken = append(msPerToken, dt.Seconds()*1e3/float64(s.Gen))
		fmt.Fprintf(m.log, "%s: %d-token prompt, run %d/%d: prefill %.2f s (%.1f tok/s), decode %d tokens %.2f s (%.2f tok/s)\n",
			t.Kind, p, i+1, runs, pt.Seconds(), float64(p)/pt.Seconds(), s.Gen, dt.Seconds(), float64(s.Gen)/dt.Seconds())
	}
	pr := PrefillResult{Tokens: p, TTFT: Summarize(ttft), TokPerSec: Summarize(prefillRate), CPUSeconds: Summarize(preCPU)}
	dr := DecodeResult{Context: p, Tokens: s.Gen, TokPerSec: Summarize(decodeRate), MsPerToken: Summarize(msPerToken),
		CPUSeconds: Summarize(decCPU),
		Traffic:    DecodeTraffic(t.Weights, p+s.Gen/2, t.KVElemBytes)}
	if pre != nil {
		shape := Describe(t.Weights)
		dn, att := shape.DeltaNetLayers, shape.AttentionLayers
		c := pre.Costs(runs, p, dn, att)
		pr.Layers = &c
		d := dec.Costs(runs*s.Gen, 1, dn, att)
		dr.Layers = &d
	}
	return pr, dr, nil
}

// bandwidth runs the copy probes (the device's too, for a GPU target) and
// states each decode result as a fraction of the best copy rate.
func (m *measurer) bandwidth(r *Report) {
	t, s := m.t, m.s
	fmt.Fprintf(m.log, "%s: copy bandwidth probe (%d MiB × %d)\n", t.Kind, s.CopyBytes>>20, s.Copies)
	r.Bandwidth = MeasureCopy(s.CopyBytes, s.Copies, s.Threads)
	ceiling := r.Bandwidth.GBps
	if t.Device != nil {
		fmt.Fprintf(m.log, "%s: device copy probe (%d MiB × %d)\n", t.Kind, s.CopyBytes>>20, s.Copies)
		b, err := MeasureDeviceCopy(t.Device, s.CopyBytes, s.Copies)
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("device copy probe failed: %v; the bandwidth fraction uses the host copy", err))
		} else {
			r.DeviceBandwidth = &b
			ceiling = b.GBps
		}
	}
	for i := range r.Decode {
		d := &r.Decode[i]
		d.AchievedGBps = float64(d.Traffic.TotalBytes) * d.TokPerSec.Median / 1e9
		if ceiling > 0 {
			d.BandwidthFraction = d.AchievedGBps / ceiling
		}
	}
}

// measurer runs timed passes of one target.
type measurer struct {
	t      Target
	s      Settings
	log    io.Writer
	greedy *model.Sampling
	// prefillCPU is the process CPU time of the last run's prefill.
	prefillCPU time.Duration
}

// run prefills a fresh sequence with a prompt of n tokens and decodes gen
// tokens greedily, returning the prefill time (to the first token) and the
// decode time. Block times are added to pre and dec when set.
func (m *measurer) run(n, gen int, seed uint64, pre, dec *BlockTimes) (prefill, decode time.Duration, err error) {
	return m.runLayers(0, n, gen, seed, pre, dec)
}

// runLayers is run through the first layers layers of the model only (0:
// all). Forward walks w.Layers, so the model is cut by shortening that slice
// for the passes; the sequence is made before, from the whole model, and the
// Weights and every layer keep their addresses, by which a backend finds
// what it prepared for them.
func (m *measurer) runLayers(layers, n, gen int, seed uint64, pre, dec *BlockTimes) (prefill, decode time.Duration, err error) {
	seq, err := m.t.Backend.NewSequence(n + gen + 1)
	if err != nil {
		return 0, 0, err
	}
	defer seq.Close()
	if w := m.t.Weights; layers > 0 && layers < len(w.Layers) {
		full := w.Layers
		w.Layers = full[:layers]
		defer func() { w.Layers = full }()
	}
	ids := promptIDs(n, m.t.Weights.Config.VocabSize, m.s.Seed^seed)

	start, cpu0 := time.Now(), processCPUTime()
	chunk := m.s.Chunk
	if chunk <= 0 || chunk > n {
		chunk = n
	}
	for len(ids) > chunk {
		if _, err := m.pass(seq, model.Input{IDs: ids[:chunk]}, pre); err != nil {
			return 0, 0, err
		}
		ids = ids[chunk:]
	}
	if _, err := m.pass(seq, model.Input{IDs: ids, Sample: m.greedy}, pre); err != nil {
		return 0, 0, err
	}
	prefill = time.Since(start)
	m.prefillCPU = processCPUTime() - cpu0

	// Decode as the engine does: step N+1 is submitted before the host
	// waits on step N, so a GPU backend is never idle between steps.
	start = time.Now()
	prev, err := m.start(seq, model.Input{Sample: m.greedy}, dec)
	if err != nil {
		return 0, 0, err
	}
	for i := 1; i < gen; i++ {
		next, err := m.start(seq, model.Input{Sample: m.greedy}, dec)
		if err != nil {
			return 0, 0, err
		}
		if _, err := prev.Wait(); err != nil {
			return 0, 0, err
		}
		prev = next
	}
	if _, err := prev.Wait(); err != nil {
		return 0, 0, err
	}
	decode = time.Since(start)
	return prefill, decode, nil
}

// start begins, records and submits one pass, timing its blocks into bt
// when set. The pass's own time is Begin through Submit plus its Wait, so
// that with step N+1 started before step N is waited on, neither step is
// charged for the other.
func (m *measurer) start(seq model.Sequence, in model.Input, bt *BlockTimes) (model.Pass, error) {
	segs := []model.Segment{{Seq: seq, In: in}}
	if bt == nil {
		return model.StartBatch(m.t.Backend, m.t.Weights, segs)
	}
	begin := time.Now()
	p, err := m.t.Backend.Begin(segs)
	if err != nil {
		return nil, err
	}
	tp := timedPass{Pass: p, t: bt}
	recorded := false
	defer func() {
		if !recorded {
			model.Abandon(p) // Forward panicked: release the recording, as model.StartBatch does
		}
	}()
	model.Forward(tp, m.t.Weights, segs)
	recorded = true
	tp.Submit()
	bt.Total += time.Since(begin)
	return waitTimer{Pass: p, bt: bt}, nil
}

// pass is start followed by Wait.
func (m *measurer) pass(seq model.Sequence, in model.Input, bt *BlockTimes) (model.Result, error) {
	p, err := m.start(seq, in, bt)
	if err != nil {
		return model.Result{Token: -1}, err
	}
	res, err := p.Wait()
	if err != nil {
		return model.Result{Token: -1}, err
	}
	return res[0], nil
}

// waitTimer adds the time spent in the pass's Wait to the block times'
// total.
type waitTimer struct {
	model.Pass
	bt *BlockTimes
}

func (w waitTimer) Wait() ([]model.Result, error) {
	start := time.Now()
	res, err := w.Pass.Wait()
	w.bt.Total += time.Since(start)
	return res, err
}

// prefixes times the first n layers for every n and fits the per-layer
// costs of prefill (PrefixPrompt tokens) and decode.
func (m *measurer) prefixes(r *Report) error {
	layers := m.t.Weights.Layers
	var pre, dec []PrefixTime
	for n := 1; n <= len(layers); n++ {
		var pt, dt []float64
		for i := range m.s.Runs {
			p, d, err := m.runLayers(n, m.s.PrefixPrompt, m.s.PrefixGen, uint64(100+i), nil, nil)
			if err != nil {
				return fmt.Errorf("first %d layers: %w", n, err)
			}
			pt = append(pt, p.Seconds()*1e3)
			dt = append(dt, d.Seconds()*1e3/float64(m.s.PrefixGen))
		}
		kinds := PrefixTime{}
		for _, l := range layers[:n] {
			if l.DeltaNet != nil {
				kinds.DeltaNet++
			} else {
				kinds.Attention++
			}
		}
		p, d := kinds, kinds
		p.Ms, d.Ms = Summarize(pt).Median, Summarize(dt).Median
		pre, dec = append(pre, p), append(dec, d)
		fmt.Fprintf(m.log, "%s: first %d layers: prefill %d tokens %.1f ms, decode %.2f ms/token\n", m.t.Kind, n, m.s.PrefixPrompt, p.Ms, d.Ms)
	}
	r.PrefixTimes = map[string][]PrefixTime{"prefill": pre, "decode": dec}
	pc, err := FitPrefixes(pre, m.s.PrefixPrompt)
	if err != nil {
		return err
	}
	dc, err := FitPrefixes(dec, 1)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		what string
		c    LayerCosts
	}{{"prefill", pc}, {"decode", dc}} {
		if f.c.FixedMs < 0 || f.c.DeltaNetLayerMs < 0 || f.c.AttentionLayerMs < 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("the %s per-layer fit has a negative term (fixed %.3g, DeltaNet %.3g, attention %.3g ms): "+
				"the timing noise is larger than a layer's cost, so its projection is unreliable; measure on a quiet machine or with more runs",
				f.what, f.c.FixedMs, f.c.DeltaNetLayerMs, f.c.AttentionLayerMs))
		}
	}
	for i := range r.Prefill {
		if r.Prefill[i].Tokens == m.s.PrefixPrompt {
			r.Prefill[i].Layers = &pc
		}
	}
	// The prefix decode runs follow a PrefixPrompt-token prompt: they
	// describe decode at the context closest to it.
	best := -1
	for i := range r.Decode {
		if best < 0 || abs(r.Decode[i].Context-m.s.PrefixPrompt) < abs(r.Decode[best].Context-m.s.PrefixPrompt) {
			best = i
		}
	}
	if best >= 0 {
		r.Decode[best].Layers = &dc
	}
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// promptIDs draws n token ids uniformly from the vocabulary: speed does not
// depend on which tokens they are, and random ids spread the routing over
// the experts as real text does.
func promptIDs(n, vocab int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = rng.IntN(vocab)
	}
	return ids
}
