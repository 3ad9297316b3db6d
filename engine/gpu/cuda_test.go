package gpu

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/gpu/cuda"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// openNamedTestDevice opens the device SUZURAN_TEST_DEVICE names for every
// test that takes its device from openTestDevice: "cuda" runs the same test
// bodies on an NVIDIA GPU (make cuda-check), and skips them, saying why,
// where no CUDA device can be opened. The fiber-order seed has no meaning
// there: a GPU's threads really run at once.
func openNamedTestDevice(t testing.TB, name string) device.Device {
	t.Helper()
	switch name {
	case "cuda":
		if err := cuda.Available(); err != nil {
			t.Skipf("SUZURAN_TEST_DEVICE=cuda, but no CUDA device can be opened here: %v", err)
		}
		dev, err := cuda.New(cuda.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		return dev
	}
	t.Fatalf("SUZURAN_TEST_DEVICE=%q: want emu or cuda", name)
	return nil
}
