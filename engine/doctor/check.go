package doctor

import (
	"fmt"

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
// and of the model it loads. dev stays open. The error is for what is not
// the GPU's doing — a model that does not load, a CPU reference run that
// fails — and then there is no check.
func CheckDevice(dev device.Device, dir string, threads int) (*NumericCheck, error) {
	check, err := openCheckModel(dir)
	if err != nil {
		return nil, err
	}
	defer check.close()
	ref, err := check.runCPU(threads)
	if err != nil {
		return nil, fmt.Errorf("the CPU backend's reference run failed: %w", err)
	}
	return check.compare(dev, ref), nil
}
