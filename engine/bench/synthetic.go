package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/synth"
)

// Synthetic describes the synthetic checkpoint a benchmark runs on.
type Synthetic struct {
	// ConfigPath is the config.json imitated. Empty: the full-size
	// mlx-community config built into the binary (synth.FullSizeConfig).
	ConfigPath string
	// Layers kept (default 4: three DeltaNet and one attention layer, at
	// full width and with the full vocabulary).
	Layers int
	Layout checkpoint.Layout
	Seed   uint64
	// CacheDir holds built checkpoints, one folder per configuration and
	// seed (default: the user cache folder's suzuran/synthetic).
	CacheDir string
}

// EnsureSynthetic returns the folder of the synthetic checkpoint o
// describes, writing it first when the cache does not hold it yet.
func EnsureSynthetic(o Synthetic, log io.Writer) (dir string, built bool, err error) {
	if log == nil {
		log = io.Discard
	}
	if o.Layers <= 0 {
		o.Layers = 4
	}
	cfg := synth.FullSizeConfig()
	if o.ConfigPath != "" {
		cfg, err = os.ReadFile(o.ConfigPath)
		if err != nil {
			return "", false, fmt.Errorf("bench: reading the config to imitate: %w", err)
		}
	}
	if o.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", false, fmt.Errorf("bench: no cache folder for the synthetic checkpoint (%v); pass one", err)
		}
		o.CacheDir = filepath.Join(base, "suzuran", "synthetic")
	}
	opt := synth.Options{Config: cfg, Layers: o.Layers, Layout: o.Layout, Seed: o.Seed}
	dir = filepath.Join(o.CacheDir, fmt.Sprintf("%s-%dlayers-%s", synth.CacheKey(opt), o.Layers, o.Layout))
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		fmt.Fprintf(log, "synthetic checkpoint: reusing %s\n", dir)
		return dir, false, nil
	}
	fmt.Fprintf(log, "synthetic checkpoint: writing %d layers (%s layout, seed %d) to %s\n", o.Layers, o.Layout, o.Seed, dir)
	res, err := synth.Write(dir, opt)
	if err != nil {
		return "", false, err
	}
	fmt.Fprintf(log, "synthetic checkpoint: %.2f GB in %d tensors, %.0f s\n", float64(res.Bytes)/1e9, res.Tensors, res.Duration.Seconds())
	return dir, true, nil
}
