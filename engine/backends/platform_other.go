//go:build !darwin

package backends

import (
	"os"

	"github.com/suzuran-app/suzuran/engine/gpu/cuda"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// platformKinds: Metal exists only on macOS; an NVIDIA GPU runs the same
// kernels through CUDA (engine/gpu/cuda), listed only where the driver,
// NVRTC and a GPU are found at run time, so that a machine without them
// offers, tests and benchmarks exactly what it did before.
func platformKinds() []kind {
	if cuda.Available() != nil {
		return nil
	}
	return []kind{{name: "cuda", openDevice: func(Options) (device.Device, error) {
		// SUZURAN_CUDA_PROFILE=FILE times every dispatch and writes the
		// kernel table there when the device closes.
		return cuda.New(cuda.Options{ProfileFile: os.Getenv("SUZURAN_CUDA_PROFILE")})
	}}}
}

// unavailable says why a backend this platform knows is not offered here.
func unavailable(name string) error {
	if name == "cuda" {
		return cuda.Available()
	}
	return nil
}
