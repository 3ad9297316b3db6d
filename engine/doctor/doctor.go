// Package doctor gathers what a bug report about running the model needs,
// for `suzuran doctor` and for the app's Settings and backend-error screens:
// the machine (OS version, chip, memory), each GPU device this build can
// use (the Metal GPU on macOS, the kernel emulator where a C++ compiler
// exists) with its limits, whether each kernel family compiles (with the
// compiler's own text when one does not), a numeric check of the GPU
// backend against the CPU backend on a cut-down demo model, and the
// configured model's validation.
//
// Run never fails as a whole: every check records its own error in the
// Report, so that a machine where nothing works still produces a report to
// send. Report.OK says whether every check passed; Report.WriteText prints
// it for people, and the Report itself marshals to the JSON of
// `suzuran doctor --json`.
package doctor

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpu"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/logits"
	"github.com/suzuran-app/suzuran/engine/machine"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// SchemaVersion is Report.Schema: it changes when a field of the JSON
// changes meaning or goes away (new fields may appear without it).
const SchemaVersion = 1

// NumericTolerance bounds the numeric check's relative error (the largest
// logit difference over the largest CPU logit): the bound the GPU pipeline
// promises with its default bf16 KV cache and half GEMM operands (the
// fixtures hold both emu and Metal to it against transformers). A kernel
// with a wrong constant is off by far more.
const NumericTolerance = 2e-2

// Options choose what Run checks.
type Options struct {
	// DemoDir is the demo model's folder (Suzuran Tiny): the numeric check
	// runs on it. Empty skips the numeric check, and says so.
	DemoDir string
	// ModelDir is the configured model to validate; empty when none is
	// configured (the report then says the demo model is used).
	ModelDir string
	// Devices names the GPU devices to check: "metal", "emu". nil means
	// DefaultDevices().
	Devices []string
	// Threads for the CPU backend and the emulator; 0 means all CPUs.
	Threads int
	// Progress, when set, gets one line per check as it runs: its name
	// when it starts, then its result and how long it took, so that a
	// person watching knows what the seconds are spent on.
	Progress io.Writer
}

// progress writes the start of a check's line and returns the function
// that ends it with the result and the check's time.
func (o Options) progress(format string, args ...any) func(result string) {
	if o.Progress == nil {
		return func(string) {}
	}
	fmt.Fprintf(o.Progress, format+"… ", args...)
	start := time.Now()
	return func(result string) {
		fmt.Fprintf(o.Progress, "%s (%.1f s)\n", result, time.Since(start).Seconds())
	}
}

// Report is everything Run found. Its JSON form is what
// `suzuran doctor --json` prints.
type Report struct {
	Schema    int       `json:"schema"`
	Version   string    `json:"version"` // the app's, set by the caller
	Time      time.Time `json:"time"`
	OK        bool      `json:"ok"`     // every check passed
	Failed    []string  `json:"failed"` // what did not, one line each
	System    System    `json:"system"`
	CPU       CPUCheck  `json:"cpu"`
	Devices   []Device  `json:"devices"`
	Model     *Model    `json:"model"` // nil when no model is configured
	DurationS float64   `json:"duration_s"`
}

// System describes the machine.
type System struct {
	OS          string `json:"os"`         // runtime.GOOS
	OSVersion   string `json:"os_version"` // "macOS 15.1 (24B83)", "Debian GNU/Linux 12 (bookworm)"
	Arch        string `json:"arch"`       // runtime.GOARCH
	Chip        string `json:"chip"`       // "Apple M2 Pro", the CPU's model name elsewhere
	MemoryBytes uint64 `json:"memory_bytes"`
	CPUs        int    `json:"cpus"`
	GoVersion   string `json:"go_version"`
}

// system reads the operating system, the chip and the memory
// (engine/machine).
func system() System {
	f := machine.Probe()
	return System{OS: f.OS, OSVersion: f.OSVersion(), Arch: runtime.GOARCH, Chip: f.Chip,
		MemoryBytes: uint64(f.Memory), CPUs: f.CPUs, GoVersion: runtime.Version()}
}

// CPUCheck is the CPU backend on the numeric check's model: the reference
// the GPU devices are compared with.
type CPUCheck struct {
	Threads int    `json:"threads"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// Device is one GPU device and its checks.
type Device struct {
	Backend string `json:"backend"` // "metal" or "emu"
	Name    string `json:"name,omitempty"`
	// Error says why the device could not be opened; nothing else is set.
	Error string `json:"error,omitempty"`
	// GPUFamily is the newest Apple GPU family the Metal device supports
	// ("Apple9"); SupportsKernels whether it is Apple7 (M1) or later, which
	// the kernels need. Both are Metal's only.
	GPUFamily       string `json:"gpu_family,omitempty"`
	SupportsKernels bool   `json:"supports_kernels"`
	// RecommendedMaxWorkingSetBytes is Metal's recommendedMaxWorkingSetSize,
	// the GPU memory the model must fit in.
	RecommendedMaxWorkingSetBytes uint64         `json:"recommended_max_working_set_bytes,omitempty"`
	MaxBufferBytes                int64          `json:"max_buffer_bytes"`
	Kernels                       []KernelFamily `json:"kernels"`
	Numeric                       *NumericCheck  `json:"numeric"`
}

// KernelFamily is one kernel source file (attention.metal, gemm.metal...)
// compiled the way the device compiles it.
type KernelFamily struct {
	File string `json:"file"`
	OK   bool   `json:"ok"`
	// Error is the compiler's text when the file does not compile.
	Error string `json:"error,omitempty"`
	// Warnings are Apple's compiler's warnings when it does.
	Warnings string `json:"warnings,omitempty"`
}

// NumericCheck compares the device's GPU backend with the CPU backend on
// the demo model cut to its first DeltaNet layer and its first attention
// layer: a prompt in one pass, then greedy decode steps.
type NumericCheck struct {
	Model         string  `json:"model"`
	Layers        []int   `json:"layers"` // the demo model's layers kept
	PromptTokens  int     `json:"prompt_tokens"`
	DecodeSteps   int     `json:"decode_steps"`
	RelativeError float64 `json:"relative_error"` // max |gpu-cpu| / max |cpu| over every logit
	Tolerance     float64 `json:"tolerance"`
	SameTokens    bool    `json:"same_tokens"` // the greedy tokens agree
	OK            bool    `json:"ok"`
	Error         string  `json:"error,omitempty"`
}

// Model is the configured model's validation.
type Model struct {
	Dir    string `json:"dir"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	Layout string `json:"layout,omitempty"` // "mlx" or "hub"
	Layers int    `json:"layers,omitempty"`
	Bits   int    `json:"bits,omitempty"` // 0: not quantized
	// WeightBytes is the size of the weight files.
	WeightBytes int64 `json:"weight_bytes,omitempty"`
	Tokenizer   bool  `json:"tokenizer"` // tokenizer.json loads
}

// probe opens a device for Run: it fills what it can of d and returns the
// device (nil when it could not be opened, with d.Error set) and a closer.
type probe func(opt Options, d *Device) (device.Device, func())

// probes are the devices this build can check, by backend name; the darwin
// build adds "metal".
var probes = map[string]probe{"emu": probeEmu}

// DefaultDevices are the devices Run checks when Options.Devices is nil:
// Metal where the build has it (the emulator needs a C++ compiler, which
// most Macs lack), else the emulator.
func DefaultDevices() []string {
	if _, ok := probes["metal"]; ok {
		return []string{"metal"}
	}
	return []string{"emu"}
}

// Available lists every device name Options.Devices accepts here.
func Available() []string {
	var names []string
	for n := range probes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Run checks the machine. It returns an error only for options it cannot
// act on (an unknown device name); every failed check is in the Report.
func Run(opt Options) (*Report, error) {
	devices := opt.Devices
	if devices == nil {
		devices = DefaultDevices()
	}
	for _, name := range devices {
		if _, ok := probes[name]; !ok {
			return nil, fmt.Errorf("doctor: no device %q in this build; it has %s", name, strings.Join(Available(), ", "))
		}
	}
	start := time.Now()
	done := opt.progress("System")
	r := &Report{Schema: SchemaVersion, Time: start.UTC(), System: system(), Devices: []Device{}, Failed: []string{}}
	done(fmt.Sprintf("%s, %s, %s", r.System.OSVersion, r.System.Chip, gib(r.System.MemoryBytes)))
	r.CPU.Threads = opt.Threads
	if r.CPU.Threads <= 0 {
		r.CPU.Threads = runtime.NumCPU()
	}

	// The CPU backend's run of the check model, the reference for every
	// device.
	var check *checkModel
	var ref *logits.Output
	if opt.DemoDir != "" {
		done := opt.progress("CPU backend on the demo model (%d threads)", r.CPU.Threads)
		var err error
		if check, err = openCheckModel(opt.DemoDir); err == nil {
			defer check.close()
			ref, err = check.runCPU(r.CPU.Threads)
		}
		if err != nil {
			r.CPU.Error = err.Error()
			r.fail("cpu backend: %v", err)
		} else {
			r.CPU.OK = true
		}
		done(okText(r.CPU.OK, r.CPU.Error))
	}

	for _, name := range devices {
		d := Device{Backend: name, Kernels: []KernelFamily{}}
		done := opt.progress("Device %s: opening it and compiling the kernels", name)
		dev, closeDev := probes[name](opt, &d)
		broken := 0
		for _, k := range d.Kernels {
			if !k.OK {
				broken++
				r.fail("%s: %s does not compile", name, k.File)
			}
		}
		switch {
		case dev == nil:
			done("FAILED: " + d.Error)
		case broken > 0:
			done(fmt.Sprintf("FAILED: %d of %d kernel files do not compile", broken, len(d.Kernels)))
		default:
			done(fmt.Sprintf("ok, %d kernel files compile", len(d.Kernels)))
		}
		if dev == nil {
			r.fail("%s: %s", name, d.Error)
			r.Devices = append(r.Devices, d)
			continue
		}
		switch {
		case opt.DemoDir == "":
			// No demo model given: nothing to compare.
		case check == nil || ref == nil:
			d.Numeric = &NumericCheck{Error: "the CPU backend's reference run failed (see cpu)"}
			r.fail("%s: numeric check: no CPU reference", name)
		case name == "metal" && !d.SupportsKernels:
			d.Numeric = &NumericCheck{Error: "skipped: this GPU is below the Apple7 family the kernels need"}
			r.fail("%s: the GPU is below Apple7 (M1); use --backend cpu", name)
		default:
			done := opt.progress("Device %s: numeric check against the CPU backend", name)
			d.Numeric = check.compare(dev, ref)
			if !d.Numeric.OK {
				r.fail("%s: numeric check: %s", name, d.Numeric.Error)
				done("FAILED: " + d.Numeric.Error)
			} else {
				done(fmt.Sprintf("ok, relative error %.3g", d.Numeric.RelativeError))
			}
		}
		closeDev()
		r.Devices = append(r.Devices, d)
	}

	if opt.ModelDir != "" {
		done := opt.progress("Model %s", opt.ModelDir)
		r.Model = validateModel(opt.ModelDir)
		done(okText(r.Model.OK, r.Model.Error))
		if !r.Model.OK {
			r.fail("model %s: %s", opt.ModelDir, r.Model.Error)
		}
	}
	r.OK = len(r.Failed) == 0
	r.DurationS = math.Round(time.Since(start).Seconds()*100) / 100
	return r, nil
}

func (r *Report) fail(format string, args ...any) {
	r.Failed = append(r.Failed, fmt.Sprintf(format, args...))
}

// checkModel is the demo model cut to the first layer of each mixer kind,
// so that the check runs every kernel family in seconds.
type checkModel struct {
	m      *checkpoint.Model
	w      model.Weights
	layers []int
	prompt []int
}

// decodeSteps is how many greedy steps follow the prompt: the decode path
// (GEMV, the split attention, the device-fed token) differs from prefill's.
// Two steps: the second consumes a token the device sampled itself.
const decodeSteps = 2

func openCheckModel(dir string) (*checkModel, error) {
	m, err := checkpoint.Load(dir)
	if err != nil {
		return nil, err
	}
	w := m.Weights
	var keep []int
	for _, kind := range []model.LayerType{model.LinearAttention, model.FullAttention} {
		if i := slices.Index(w.Config.LayerTypes, kind); i >= 0 {
			keep = append(keep, i)
		}
	}
	if len(keep) == 0 {
		m.Close()
		return nil, fmt.Errorf("%s: the model has no layers", dir)
	}
	c := &checkModel{m: m, w: *w, layers: keep}
	c.w.Layers = nil
	c.w.Config.LayerTypes = nil
	for _, i := range keep {
		c.w.Layers = append(c.w.Layers, w.Layers[i])
		c.w.Config.LayerTypes = append(c.w.Config.LayerTypes, w.Config.LayerTypes[i])
	}
	c.w.Config.NumLayers = len(keep)
	// A fixed prompt spread over the vocabulary, longer than the GEMV's
	// row limit so that the prefill GEMMs run too.
	for i := 1; i <= 12; i++ {
		c.prompt = append(c.prompt, (i*7919)%w.Config.VocabSize)
	}
	return c, nil
}

func (c *checkModel) close() { c.m.Close() }

func (c *checkModel) runCPU(threads int) (*logits.Output, error) {
	b, err := cpu.New(&c.w, cpu.Options{Threads: threads, Sampler: sample.New()})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return logits.Compute(b, &c.w, c.prompt, decodeSteps)
}

// compare runs the check model on dev's GPU backend and holds it to the
// CPU backend's ref.
func (c *checkModel) compare(dev device.Device, ref *logits.Output) *NumericCheck {
	n := &NumericCheck{Model: c.m.Dir, Layers: c.layers, PromptTokens: len(c.prompt), DecodeSteps: decodeSteps, Tolerance: NumericTolerance}
	out, err := func() (*logits.Output, error) {
		b, err := gpu.New(dev, &c.w, gpu.Options{})
		if err != nil {
			return nil, err
		}
		defer b.Close()
		return logits.Compute(b, &c.w, c.prompt, decodeSteps)
	}()
	if err != nil {
		n.Error = err.Error()
		return n
	}
	n.SameTokens = slices.Equal(out.GenIDs, ref.GenIDs)
	n.RelativeError = relError(append(out.PromptLogits, out.GenLogits...), append(ref.PromptLogits, ref.GenLogits...))
	switch {
	case !(n.RelativeError <= n.Tolerance): // NaN fails too
		n.Error = fmt.Sprintf("logits differ from the CPU backend's by %.3g of their scale, over the tolerance %g: the GPU computes wrong numbers", n.RelativeError, n.Tolerance)
	case !n.SameTokens:
		n.Error = fmt.Sprintf("greedy tokens %v, the CPU backend chose %v", out.GenIDs, ref.GenIDs)
	default:
		n.OK = true
	}
	// JSON has no NaN or infinity: report those as -1 beside the error.
	if math.IsNaN(n.RelativeError) || math.IsInf(n.RelativeError, 0) {
		n.RelativeError = -1
	}
	return n
}

// relError is max|got-want| / max|want|; NaN when got holds a NaN, +Inf
// when the lengths differ.
func relError(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var diff, scale float64
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			return math.NaN()
		}
		diff = max(diff, d)
		scale = max(scale, math.Abs(float64(want[i])))
	}
	if scale == 0 {
		return diff
	}
	return diff / scale
}

// validateModel loads the model folder as the engine would — config,
// every tensor's shape, the tokenizer — without running it.
func validateModel(dir string) *Model {
	r := &Model{Dir: dir}
	m, err := checkpoint.Load(dir)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer m.Close()
	r.Layout = m.Layout.String()
	r.Layers = len(m.Weights.Layers)
	r.WeightBytes = m.Bytes
	if q := m.Weights.Config.Quantization; q != nil {
		r.Bits = q.Bits
	}
	if _, err := tokenizer.Load(dir); err != nil {
		r.Error = fmt.Sprintf("the weights load, but the tokenizer does not: %v", err)
		return r
	}
	r.Tokenizer = true
	r.OK = true
	return r
}

// errorText is err's text, "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// WriteText prints the report for people: one line per fact, the failures
// first, so that the top of a pasted report says what is wrong.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	if r.OK {
		p("Everything checked works.")
	} else {
		p("%d problem(s):", len(r.Failed))
		for _, f := range r.Failed {
			p("  - %s", f)
		}
	}
	if r.Version != "" {
		p("\nSuzuran %s, report schema %d, %s, took %.1f s", r.Version, r.Schema, r.Time.Format(time.RFC3339), r.DurationS)
	}
	s := r.System
	p("\nSystem")
	p("  OS:      %s (%s/%s)", s.OSVersion, s.OS, s.Arch)
	p("  Chip:    %s, %d CPUs", s.Chip, s.CPUs)
	p("  Memory:  %s", gib(s.MemoryBytes))
	p("  Go:      %s", s.GoVersion)
	p("\nCPU backend (%d threads): %s", r.CPU.Threads, okText(r.CPU.OK, r.CPU.Error))
	for _, d := range r.Devices {
		p("\nDevice %s", d.Backend)
		if d.Error != "" {
			p("  could not open: %s", d.Error)
		} else {
			p("  Name:    %s", strings.TrimPrefix(d.Name, d.Backend+": "))
			if d.GPUFamily != "" {
				p("  Family:  %s (kernels need Apple7 or later: %s)", d.GPUFamily, yesNo(d.SupportsKernels))
			}
			if d.RecommendedMaxWorkingSetBytes > 0 {
				p("  recommendedMaxWorkingSetSize: %s", gib(d.RecommendedMaxWorkingSetBytes))
			}
			p("  Largest buffer: %s", gib(uint64(d.MaxBufferBytes)))
		}
		for _, k := range d.Kernels {
			p("  Kernels %-18s %s", k.File+":", okText(k.OK, k.Error))
			if k.Warnings != "" {
				p("    warnings: %s", k.Warnings)
			}
		}
		if n := d.Numeric; n != nil {
			if n.Model == "" {
				p("  Numeric check: %s", okText(n.OK, n.Error))
			} else {
				p("  Numeric check vs CPU (layers %v of %s, %d prompt tokens, %d decode steps): relative error %.3g, tolerance %g: %s",
					n.Layers, n.Model, n.PromptTokens, n.DecodeSteps, n.RelativeError, n.Tolerance, okText(n.OK, n.Error))
			}
		}
	}
	if m := r.Model; m != nil {
		p("\nModel %s: %s", m.Dir, okText(m.OK, m.Error))
		if m.Layers > 0 {
			bits := "not quantized"
			if m.Bits > 0 {
				bits = fmt.Sprintf("%d-bit", m.Bits)
			}
			p("  %s layout, %d layers, %s, %s of weights", m.Layout, m.Layers, bits, gib(uint64(m.WeightBytes)))
		}
	} else {
		p("\nModel: none configured (the demo model runs)")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func okText(ok bool, err string) string {
	if ok {
		return "ok"
	}
	if err == "" {
		return "FAILED"
	}
	return "FAILED: " + err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// gib writes a byte count in GiB, or MiB below one GiB.
func gib(n uint64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
