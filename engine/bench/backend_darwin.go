package bench

import (
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/gpu/metal"
)

func init() {
	openers["metal"] = func(m *checkpoint.Model, threads int) (Target, func() error, error) {
		dev, err := metal.NewDefault()
		if err != nil {
			return Target{}, nil, err
		}
		t, closeFn, err := gpuTarget("metal", dev, m)
		if err != nil {
			return Target{}, nil, err
		}
		t.Device = dev
		return t, closeFn, nil
	}
}
