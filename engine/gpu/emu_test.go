package gpu

import (
	"os"
	"strconv"
	"testing"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
)

// envSeed reads SUZURAN_KERNEL_SEED, to replay a failing random input.
func envSeed() uint64 {
	s, _ := strconv.ParseUint(os.Getenv("SUZURAN_KERNEL_SEED"), 10, 64)
	return s
}

// openTestDevice opens the emulator device running the embedded kernels
// with the given fiber-order seed (0: thread order), or the device that
// SUZURAN_TEST_DEVICE names (cuda_test.go).
func openTestDevice(t testing.TB, seed uint64) device.Device {
	t.Helper()
	if name := os.Getenv("SUZURAN_TEST_DEVICE"); name != "" && name != "emu" {
		return openNamedTestDevice(t, name)
	}
	dev, err := emu.New(emu.Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}
