package imageproc

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/machine"
	"github.com/suzuran-app/suzuran/engine/machine/childrss"
)

// The decompression bomb is decoded in a child process (this test binary
// again) whose peak RSS the kernel measures and whose Go heap the runtime
// reports: a 30,000 × 30,000 PNG header would make the decoder allocate
// 3.6 GB of pixels, which must be refused from the header.
const (
	bombEnv = "SUZURAN_IMAGEPROC_BOMB"
	// maxBombRSS bounds the child's peak resident size: the Go runtime
	// and the test binary take ~10-20 MB; the file is a few hundred bytes.
	maxBombRSS = 64 << 20
	// childRSSCeiling stops a failing child before it takes the machine.
	childRSSCeiling = 1 << 30
)

func TestMain(m *testing.M) {
	if path := os.Getenv(bombEnv); path != "" {
		os.Exit(decodeInChild(path))
	}
	os.Exit(m.Run())
}

type bombResult struct {
	PeakRSS int64  `json:"peak_rss"`
	HeapSys uint64 `json:"heap_sys"`
	Width   int    `json:"width"`
	Error   string `json:"error"`
	TooBig  bool   `json:"too_big"`
}

func decodeInChild(path string) int {
	childrss.Guard(childRSSCeiling)
	var r bombResult
	img, _, err := DecodeFile(path)
	if err != nil {
		r.Error, r.TooBig = err.Error(), errors.Is(err, ErrTooLarge)
	} else {
		r.Width = img.Width
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.PeakRSS, r.HeapSys = machine.PeakRSS(), ms.HeapSys
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

func runChild(t *testing.T, data []byte) bombResult {
	t.Helper()
	path := filepath.Join(t.TempDir(), "image.png")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := childrss.Run(t, os.Args[0], bombEnv+"="+path)
	var r bombResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("child printed %q: %v", out, err)
	}
	return r
}

func TestBombRefusedBeforeAllocation(t *testing.T) {
	r := runChild(t, rawPNG(30000, 30000, 2, 8, nil))
	t.Logf("30000 × 30000 PNG header: peak RSS %.1f MB, Go heap %.1f MB: %s", float64(r.PeakRSS)/(1<<20), float64(r.HeapSys)/(1<<20), r.Error)
	if !r.TooBig || !strings.Contains(r.Error, "30000 × 30000") {
		t.Errorf("not refused for its size: %q", r.Error)
	}
	if r.PeakRSS > maxBombRSS || r.HeapSys > maxBombRSS {
		t.Errorf("peak RSS %d MB, heap %d MB: above %d MB", r.PeakRSS>>20, r.HeapSys>>20, maxBombRSS>>20)
	}
	// The measure sees a decoder's allocation: a 6000 × 6000 header
	// (36 MP, under the limit) with no pixel data makes png.Decode
	// allocate its 144 MB image before it finds the data missing.
	c := runChild(t, rawPNG(6000, 6000, 6, 8, nil))
	t.Logf("6000 × 6000 PNG header (control): peak RSS %.1f MB, Go heap %.1f MB: %s", float64(c.PeakRSS)/(1<<20), float64(c.HeapSys)/(1<<20), c.Error)
	if c.TooBig || c.HeapSys < 6000*6000*4 {
		t.Errorf("the control was refused for its size or allocated only %d MB: the measure does not show what it should", c.HeapSys>>20)
	}
}
