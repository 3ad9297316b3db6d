package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/app/service"
	"github.com/suzuran-app/suzuran/app/settings"
	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/doctor"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
)

// newDoctorCmd is `suzuran doctor`: the first-run diagnostic, whose output
// is what a bug report needs. The checks live in engine/doctor; this
// command resolves the demo model and the configured one, and prints.
func newDoctorCmd() *cobra.Command {
	var (
		asJSON  bool
		dir     string
		devices string
		threads int
		first   firstRunFlags
	)
	cmd := &cobra.Command{
		Use:   "doctor [--json] [--model DIR] [--device " + strings.Join(doctor.Available(), ",") + "]",
		Short: "Check this machine, its GPU, the kernels and the model, and print what a bug report needs",
		Long: `doctor checks what Suzuran needs to run and prints what a bug report needs:
the OS version, chip and memory; for each GPU device (Metal on macOS, the
kernel emulator elsewhere) its name, GPU family, recommendedMaxWorkingSetSize
and whether each kernel file compiles, with the compiler's text when one does
not; a numeric check of the GPU backend against the CPU backend on the demo
model cut to one DeltaNet and one attention layer; and whether the configured
model (--model, else the "model" setting) loads. With --json it prints the
same as one JSON object. It exits with status 1 when a check failed.

With --first-run it runs instead the self-check the app makes the first time
a version runs on an OS version and GPU, before the window says Ready (the
numeric check on the demo model and on the model's first layers, falling
back to the CPU on any GPU failure), remembered in --state, and prints its
result as JSON: what failed if anything, how long it took, and whether the
kernels came from the app bundle's precompiled library or were compiled.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if first.on {
				return runFirstRun(cmd, dir, threads, first)
			}
			var list []string
			if devices != "" {
				list = strings.Split(devices, ",")
			}
			// Each check's line shows as it runs (the whole takes seconds to
			// a minute); with --json they go to stderr, keeping stdout JSON.
			out := cmd.OutOrStdout()
			progress := out
			if asJSON {
				progress = cmd.ErrOrStderr()
			}
			fmt.Fprintln(progress, "Checking this machine:")
			r, err := runDoctor(dir, list, threads, progress)
			if err != nil {
				return err
			}
			fmt.Fprintln(progress)
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				err = enc.Encode(r)
			} else {
				err = r.WriteText(out)
			}
			if err != nil {
				return err
			}
			if !r.OK {
				return fmt.Errorf("doctor: %d check(s) failed; attach this report to the bug report", len(r.Failed))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	cmd.Flags().StringVar(&dir, "model", "", `model folder to validate (default: the "model" setting, if any)`)
	cmd.Flags().StringVar(&devices, "device", "", "comma-separated GPU devices to check (default: "+strings.Join(doctor.DefaultDevices(), ",")+")")
	cmd.Flags().IntVar(&threads, "threads", 0, "CPU threads for the CPU backend and the emulator (0: all)")
	cmd.Flags().BoolVar(&first.on, "first-run", false, "run the app's first-start GPU self-check on the model instead (as the window does before it says Ready) and print its result as JSON")
	cmd.Flags().StringVar(&first.backend, "backend", defaultBackend(), "with --first-run: the backend to check ("+strings.Join(engine.Backends(), ", ")+")")
	cmd.Flags().StringVar(&first.state, "state", "", "with --first-run: the file that remembers the result (default: the app's, beside settings.json)")
	cmd.Flags().BoolVar(&first.recheck, "recheck", false, "with --first-run: check even when a result is remembered")
	return cmd
}

// firstRunFlags are doctor's --first-run, --backend, --state and --recheck.
type firstRunFlags struct {
	on, recheck    bool
	backend, state string
}

// firstRunReport is what `suzuran doctor --first-run` prints: the
// self-check's result and the backend the engine then ran on.
type firstRunReport struct {
	gpucheck.Result
	Model  string  `json:"model"`
	RunsOn string  `json:"runs_on"` // the engine's backend ("gpu: metal: Apple M2 Pro", "cpu: 8 threads")
	TotalS float64 `json:"total_s"` // the whole load, the check included
}

// runFirstRun loads the model (--model, the configured one, else the demo)
// through the app's GPU self-check, prints the result, and fails when the
// engine fell back to the CPU.
func runFirstRun(cmd *cobra.Command, dir string, threads int, f firstRunFlags) error {
	var err error
	if dir == "" {
		if dir, err = commandModel(cmd, ""); err != nil {
			return err
		}
	}
	logger := zerolog.Nop()
	o := gpuCheckOptions(f.backend, logger)
	if f.state != "" {
		o.StateFile = f.state
	}
	o.Recheck = f.recheck
	start := time.Now()
	e, res, err := gpucheck.Load(dir, engine.LoadOptions{Backend: f.backend, Threads: threads}, o)
	if err != nil {
		return err
	}
	rep := firstRunReport{Result: res, Model: dir, RunsOn: e.BackendName(), TotalS: time.Since(start).Round(10 * time.Millisecond).Seconds()}
	e.Close()
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return err
	}
	if res.Fallback {
		return fmt.Errorf("doctor --first-run: %s", res.Message)
	}
	return nil
}

// runDoctor runs the diagnostic as `suzuran doctor` does: model is the
// folder to validate ("" for the "model" setting, if any), devices the GPU
// devices to check (nil for the platform's default), threads the CPU
// threads (0 for all). The window's Settings and backend-error screens call
// it too (with "", nil, 0) and show Report.WriteText's text or the JSON.
// It takes seconds; the error is only for options it cannot act on.
// progress, when not nil, gets each check's line as it runs.
func runDoctor(model string, devices []string, threads int, progress io.Writer) (*doctor.Report, error) {
	opt := doctor.Options{Devices: devices, Threads: threads, Progress: progress}
	var err error
	if opt.ModelDir, err = doctorModel(model); err != nil {
		return nil, err
	}
	// The demo model is installed from the binary, as commands without a
	// model do; a failure is the numeric check's to report.
	if root, err := models.DefaultRoot(); err == nil {
		opt.DemoDir, _ = models.Install(root)
	}
	r, err := doctor.Run(opt)
	if err != nil {
		return nil, err
	}
	r.Version = version
	return r, nil
}

// doctorJSON is the report of `suzuran doctor --json`, for the window's
// "Copy report".
func doctorJSON() (string, error) {
	r, err := runDoctor("", nil, 0, nil)
	if err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	return string(b) + "\n", err
}

// gpuCheckOptions configure the GPU self-check of `suzuran serve --no-ui`
// as the window's (app/service): the result remembered beside
// settings.json, the demo model's check included.
func gpuCheckOptions(backend string, logger zerolog.Logger) gpucheck.Options {
	o := gpucheck.Options{Version: version, OnFallback: func(r gpucheck.Result) {
		logger.Warn().Str("stage", r.Stage).Str("error", r.Error).Msg(r.Message)
	}}
	if p, err := settings.Path(); err == nil {
		o.StateFile = filepath.Join(filepath.Dir(p), service.GPUCheckFile)
	}
	if backend != "cpu" {
		if root, err := models.DefaultRoot(); err == nil {
			o.DemoDir, _ = models.Install(root)
		}
	}
	return o
}

// doctorModel is the model doctor validates: --model, else the configured
// one; "" when neither is set (the app then runs the demo model, which the
// numeric check covers).
func doctorModel(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return configuredModel()
}
