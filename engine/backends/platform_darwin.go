package backends

import (
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpu/metal"
)

// platformKinds: on macOS the GPU backend also runs on Metal.
func platformKinds() []kind {
	return []kind{{name: "metal", openDevice: func(Options) (device.Device, error) {
		return metal.NewDefault()
	}}}
}

// unavailable: every backend a Mac knows is offered.
func unavailable(string) error { return nil }
