package modelhost

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
)

// TestFallsBackToCPU: a GPU that cannot be opened leaves the model on the
// CPU, ready, and the state says why in the window's words, under
// `suzuran serve --no-ui` as in the window.
func TestFallsBackToCPU(t *testing.T) {
	h := New(Options{Load: engine.LoadOptions{Backend: "emu", Threads: 1}, GPU: gpucheck.Options{
		Version: "test",
		OpenDevice: func(string, int) (device.Device, error) {
			return nil, errors.New("metal: no Metal device found")
		},
	}})
	h.Load(fixtureDir)
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	e, _, err := h.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const want = "Running on the CPU: the GPU check failed — no usable GPU was found (metal: no Metal device found); answers are slower"
	st := h.Status()
	if st.State != StateReady || !strings.HasPrefix(e.BackendName(), "cpu") || st.Fallback != want {
		t.Errorf("status %+v on %q, want ready on the cpu backend with the reason", st, e.BackendName())
	}
}
