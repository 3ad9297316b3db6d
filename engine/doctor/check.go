package doctor

import (
	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// SystemInfo describes this machine as the report's System does (the
// app's GPU self-check keys its remembered result by the OS version).
func SystemInfo() System { return system() }

// CheckDevice runs the numeric check on dev: the model in dir cut to its
// first DeltaNet layer and its first attention layer, a prompt in one
// pass and greedy decode steps, on the GPU backend over dev against the
// CPU backend (threads; 0 for all CPUs). It is the check Run makes of the
// demo model, and the app's first-run self-check makes of the demo model
// and of the model it loads. dev stays open. A model that does not load,
// or a CPU reference that fails, is reported in the check's Error too.
func CheckDevice(dev device.Device, dir string, threads int) *NumericCheck {
	check, err := openCheckModel(dir)
	if err != nil {
		return &NumericCheck{Model: dir, Tolerance: NumericTolerance, Error: err.Error()}
	}
	defer check.close()
	ref, err := check.runCPU(threads)
	if err != nil {
		return &NumericCheck{Model: dir, Tolerance: NumericTolerance, Error: "the CPU backend's reference run failed: " + err.Error()}
	}
	return check.compare(dev, ref)
}
