package checkpoint_test

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/synth"
)

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestLoadHeapGrowth loads a synthetic checkpoint with the full model's
// widths (2 layers: one DeltaNet, one attention, full 248,320 vocabulary,
// 256 experts; about 2.2 GB in the MLX 4-bit layout) and checks that the Go
// heap grows by less than 2 % of the checkpoint's size: the matrices must be
// views into the mapping, not copies.
func TestLoadHeapGrowth(t *testing.T) {
	cfg := synth.FullSizeConfig()
	dir := filepath.Join(t.TempDir(), "full-width")
	res, err := synth.Write(dir, synth.Options{Config: cfg, Layers: 2, Seed: 1,
		TokenizerDir: fixtures.Demo(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("synthetic checkpoint: %.2f GB in %v", float64(res.Bytes)/1e9, res.Duration.Round(time.Millisecond))

	before := heapAlloc()
	start := time.Now()
	m, err := checkpoint.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	after := heapAlloc()
	defer m.Close()
	growth := float64(after) - float64(before)
	frac := growth / float64(m.Bytes)
	t.Logf("load %v; heap growth %.2f MB = %.4f %% of %.2f GB", elapsed.Round(time.Millisecond), growth/1e6, 100*frac, float64(m.Bytes)/1e9)
	if frac > 0.02 {
		t.Errorf("heap grew by %.2f %% of the checkpoint size, want < 2 %%", 100*frac)
	}
	// The weights are really there: touch one expert row at the far end of
	// the mapping.
	w := m.Weights
	last := w.Layers[1].MoE.Down[255]
	row := make([]float32, last.In)
	last.Row(last.Out-1, row)
	var nonzero int
	for _, v := range row {
		if v != 0 {
			nonzero++
		}
	}
	if nonzero < last.In/2 {
		t.Errorf("last expert row has %d nonzero values of %d", nonzero, last.In)
	}
	runtime.KeepAlive(m)
}
