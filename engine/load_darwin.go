package engine

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu"
	"github.com/suzuran-app/suzuran/engine/gpu/metal"
	"github.com/suzuran-app/suzuran/engine/model"
)

// On macOS the GPU backend also runs on Metal, the app's default there.
func init() {
	RegisterBackend("metal", func(w *model.Weights, _ model.Sampler) (model.Backend, error) {
		dev, err := metal.NewDefault()
		if err != nil {
			return nil, fmt.Errorf("metal backend: %w", err)
		}
		b, err := gpu.New(dev, w, gpu.Options{})
		if err != nil {
			dev.Close()
			return nil, err
		}
		return deviceBackend{b, dev}, nil
	})
}
