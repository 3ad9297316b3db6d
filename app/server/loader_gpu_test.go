package server

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

// TestLoaderFallsBackToCPU: `suzuran serve --no-ui` loads through the same
// GPU check as the window: a GPU that cannot be opened leaves the model on
// the CPU, ready, and Status says why in the window's words.
func TestLoaderFallsBackToCPU(t *testing.T) {
	l := NewLoader(fixtureDir, engine.LoadOptions{Backend: "emu", Threads: 1})
	l.SetGPUCheck(gpucheck.Options{Version: "test", OpenDevice: func(string, int) (device.Device, error) {
		return nil, errors.New("metal: no Metal device found")
	}})
	l.Load()
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	e, _, err := l.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := l.Status()
	if st.State != StateReady || !strings.HasPrefix(e.BackendName(), "cpu") ||
		st.Fallback != "Running on the CPU: the GPU check failed — no usable GPU was found (metal: no Metal device found); answers are slower" {
		t.Errorf("status %+v on %q, want ready on the cpu backend with the reason", st, e.BackendName())
	}
}
