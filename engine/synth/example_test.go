package synth_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/synth"
)

// The benchmark checkpoint: full width, 4 layers (three DeltaNet, one
// attention), MLX 4-bit, about 2.5 GB, cached under its key.
func Example() {
	opt := synth.Options{Config: synth.FullSizeConfig(), Layers: 4, Seed: 1, Layout: checkpoint.MLX,
		TokenizerDir: "assets/models/suzuran-tiny"} // relative to the module root
	dir := filepath.Join(os.TempDir(), "suzuran-synth-"+synth.CacheKey(opt))
	if _, err := os.Stat(dir); err != nil {
		if _, err := synth.Write(dir, opt); err != nil {
			fmt.Println(err)
			return
		}
	}
	m, err := checkpoint.Load(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	fmt.Println(len(m.Weights.Layers), "layers")
}
