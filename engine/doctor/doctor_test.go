package doctor

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/metalkernels"
)

// demoDir is the demo model as the repository holds it (the app installs
// the same files from its binary).
func demoDir(t *testing.T) string {
	return filepath.Join(fixtures.ModuleRoot(t), "assets", "models", "suzuran-tiny")
}

func kernelFiles() int {
	n := 0
	for name := range metalkernels.Sources() {
		if strings.HasSuffix(name, ".metal") {
			n++
		}
	}
	return n
}

// TestRunOnEmu runs the whole diagnostic with the emulator: the machine is
// described, the CPU backend runs, every kernel file compiles, the GPU
// backend on the emulator agrees with the CPU backend within
// NumericTolerance, and the tiny fixture validates as the configured model.
func TestRunOnEmu(t *testing.T) {
	model := fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit")
	r, err := Run(Options{DemoDir: demoDir(t), ModelDir: model, Devices: []string{"emu"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || len(r.Failed) != 0 {
		t.Fatalf("report not OK: %v", r.Failed)
	}
	s := r.System
	if s.OS == "" || s.Arch == "" || s.OSVersion == "" || s.MemoryBytes == 0 || s.CPUs == 0 || s.GoVersion == "" {
		t.Errorf("system incomplete: %+v", s)
	}
	if !r.CPU.OK || r.CPU.Threads == 0 {
		t.Errorf("cpu: %+v", r.CPU)
	}
	if len(r.Devices) != 1 {
		t.Fatalf("%d devices, want the emulator", len(r.Devices))
	}
	d := r.Devices[0]
	if d.Backend != "emu" || !strings.HasPrefix(d.Name, "emu: ") || d.MaxBufferBytes <= 0 || !d.SupportsKernels {
		t.Errorf("emu device: %+v", d)
	}
	if len(d.Kernels) != kernelFiles() {
		t.Errorf("%d kernel families reported, the sources have %d .metal files", len(d.Kernels), kernelFiles())
	}
	for _, k := range d.Kernels {
		if !k.OK || k.Error != "" {
			t.Errorf("%s: %+v", k.File, k)
		}
	}
	n := d.Numeric
	if n == nil || !n.OK || !n.SameTokens || len(n.Layers) != 2 || n.PromptTokens == 0 {
		t.Fatalf("numeric check: %+v", n)
	}
	// Two different implementations never agree to the last bit; an exact
	// zero would mean the check compared the CPU with itself.
	if !(n.RelativeError > 0 && n.RelativeError <= NumericTolerance) {
		t.Errorf("relative error %g, want in (0, %g]", n.RelativeError, NumericTolerance)
	}
	m := r.Model
	if m == nil || !m.OK || m.Layout != "mlx" || m.Layers == 0 || m.Bits != 4 || !m.Tokenizer || m.WeightBytes == 0 {
		t.Errorf("model: %+v", m)
	}
	t.Logf("emu vs cpu on layers %v: relative error %.3g; %.2f s", n.Layers, n.RelativeError, r.DurationS)
}

// A broken model, a missing demo model and an unknown device each come
// back as what failed, never as a crash or a silent pass.
func TestRunReportsFailures(t *testing.T) {
	if _, err := Run(Options{Devices: []string{"vulkan"}}); err == nil || !strings.Contains(err.Error(), `no device "vulkan"`) {
		t.Errorf("unknown device: %v", err)
	}
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "config.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Run(Options{DemoDir: filepath.Join(t.TempDir(), "absent"), ModelDir: broken, Devices: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || r.CPU.OK || r.CPU.Error == "" || r.Model == nil || r.Model.OK || r.Model.Error == "" {
		t.Fatalf("report of a broken setup: ok %v, cpu %+v, model %+v", r.OK, r.CPU, r.Model)
	}
	if len(r.Failed) != 2 || !strings.HasPrefix(r.Failed[0], "cpu backend: ") || !strings.HasPrefix(r.Failed[1], "model "+broken) {
		t.Errorf("failed lines %q, want the cpu backend's and the model's", r.Failed)
	}
}

// The numeric check fails when the device's numbers are off: here the
// CPU reference is scaled by 1.05, as a kernel with one wrong constant
// would scale its output.
func TestNumericCheckCatchesWrongNumbers(t *testing.T) {
	c, err := openCheckModel(demoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ref, err := c.runCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	dev, closeDev := probeEmu(Options{}, &Device{})
	if dev == nil {
		t.Fatal("the emulator did not open")
	}
	defer closeDev()
	// (TestRunOnEmu checks the unchanged reference passes.)
	for i := range ref.PromptLogits {
		ref.PromptLogits[i] *= 1.05
	}
	n := c.compare(dev, ref)
	if n.OK || !strings.Contains(n.Error, "over the tolerance") {
		t.Errorf("reference scaled by 1.05: %+v, want a failure over the tolerance", n)
	}
}

// The JSON form decodes into Report with no unknown field, and carries
// every section under its documented name.
func TestReportJSON(t *testing.T) {
	r, err := Run(Options{Devices: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var back Report
	if err := dec.Decode(&back); err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "version", "time", "ok", "failed", "system", "cpu", "devices", "model", "duration_s"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON has no %q", k)
		}
	}
	if back.Schema != SchemaVersion || back.System.OS == "" {
		t.Errorf("round trip: %+v", back)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Everything checked works.", "System\n  OS:      " + r.System.OSVersion, "Model: none configured"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}
