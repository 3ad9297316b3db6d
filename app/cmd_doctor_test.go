package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/doctor"
)

// `suzuran doctor --json` on Linux: the CPU part and the emulator part run,
// and the JSON is a doctor.Report with nothing unknown in it, describing a
// machine where every check passed.
func TestDoctorJSON(t *testing.T) {
	stdout, stderr, err := execute(t, "doctor", "--json", "--model", tinyModel)
	if err != nil {
		t.Fatalf("doctor --json: %v\nstderr: %s\nstdout: %s", err, stderr, stdout)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var r doctor.Report
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("stdout is not a doctor report: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Error("stdout holds more than one JSON value")
	}
	// The checks' progress goes to stderr, out of the JSON's way.
	if !strings.Contains(stderr, "Checking this machine:\nSystem… ") || !strings.Contains(stderr, "Device emu: numeric check against the CPU backend… ok") {
		t.Errorf("stderr lacks the progress lines:\n%s", stderr)
	}
	if !r.OK || len(r.Failed) != 0 || r.Schema != doctor.SchemaVersion || r.Version != version {
		t.Fatalf("report: ok %v, failed %q, schema %d, version %q", r.OK, r.Failed, r.Schema, r.Version)
	}
	if r.System.OS != "linux" || r.System.MemoryBytes == 0 || r.System.OSVersion == "" {
		t.Errorf("system: %+v", r.System)
	}
	if !r.CPU.OK {
		t.Errorf("cpu: %+v", r.CPU)
	}
	if len(r.Devices) != 1 || r.Devices[0].Backend != "emu" {
		t.Fatalf("devices %+v, want the emulator alone (Linux's default)", r.Devices)
	}
	d := r.Devices[0]
	if len(d.Kernels) == 0 {
		t.Error("no kernel families reported")
	}
	for _, k := range d.Kernels {
		if !k.OK {
			t.Errorf("kernel family %s: %s", k.File, k.Error)
		}
	}
	if d.Numeric == nil || !d.Numeric.OK || !(d.Numeric.RelativeError <= doctor.NumericTolerance) {
		t.Errorf("numeric check: %+v", d.Numeric)
	}
	abs, _ := filepath.Abs(tinyModel)
	if m := r.Model; m == nil || !m.OK || (m.Dir != tinyModel && m.Dir != abs) || m.Layout != "mlx" {
		t.Errorf("model: %+v", r.Model)
	}
}

// The text form with a model folder that does not load: the problem comes
// first, names the folder, and the command exits with status 1.
func TestDoctorTextReportsABrokenModel(t *testing.T) {
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "config.json"), []byte(`{"model_type": "llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := execute(t, "doctor", "--model", broken)
	if err == nil {
		t.Fatalf("doctor with a broken model exited 0\n%s", stdout)
	}
	// Each check's line comes first, written as it ran; then the report,
	// which starts with the problem.
	progress, report, found := strings.Cut(stdout, "\n\n")
	if !found {
		t.Fatalf("no progress lines before the report:\n%s", stdout)
	}
	lines := strings.Split(progress, "\n")
	wantLines := []string{"Checking this machine:", "System… ", "CPU backend on the demo model (", "Device emu: opening it and compiling the kernels… ok, ",
		"Device emu: numeric check against the CPU backend… ok, relative error ", "Model " + broken + "… FAILED: "}
	if len(lines) != len(wantLines) {
		t.Fatalf("progress lines %q, want %d", lines, len(wantLines))
	}
	for i, want := range wantLines {
		if !strings.HasPrefix(lines[i], want) || (i > 0 && !strings.HasSuffix(lines[i], " s)")) {
			t.Errorf("progress line %d %q, want it to start with %q and end with its time", i, lines[i], want)
		}
	}
	if !strings.HasPrefix(report, "1 problem(s):\n  - model "+broken+": ") {
		t.Errorf("text report does not start with the model's problem:\n%s", stdout)
	}
	for _, want := range []string{"\nSystem\n  OS:      ", "\nCPU backend (", "\nDevice emu\n", "Numeric check vs CPU", "\nModel " + broken + ": FAILED: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "1 check(s) failed; attach this report") {
		t.Errorf("stderr %q, want the failure count", stderr)
	}
}

// `suzuran doctor --first-run` runs the app's first-start GPU self-check
// (the emulator standing in for Metal here) and prints its result; the
// second run finds it remembered in the state file and does not check
// again. make mac-check reads these fields.
func TestDoctorFirstRun(t *testing.T) {
	state := filepath.Join(t.TempDir(), "gpu-check.json")
	for i, wantRan := range []bool{true, false} {
		stdout, stderr, err := execute(t, "doctor", "--first-run", "--backend", "emu", "--threads", "2", "--model", tinyModel, "--state", state)
		if err != nil {
			t.Fatalf("run %d: %v\nstderr: %s\nstdout: %s", i+1, err, stderr, stdout)
		}
		var r struct {
			OK, Ran, Fallback bool
			Library           string
			RunsOn            string  `json:"runs_on"`
			DurationS         float64 `json:"duration_s"`
			Time              string
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, stdout)
		}
		if !r.OK || r.Ran != wantRan || r.Fallback || r.Library != "emulator" || !strings.HasPrefix(r.RunsOn, "gpu: emu") || r.DurationS <= 0 || r.Time == "" {
			t.Errorf("run %d: %+v, want ok, ran %v, on emu, with the check's time", i+1, r, wantRan)
		}
	}
}
