//go:build darwin

package doctor

import (
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpu/metal"
)

func init() { probes["metal"] = probeMetal }

// probeMetal opens the system's default Metal device, reads its family and
// memory budget, and compiles every kernel file with Apple's compiler
// (newLibraryWithSource, as the device does, without the family check, so
// that an unsupported GPU still reports what compiles).
func probeMetal(opt Options, d *Device) (device.Device, func()) {
	dev, err := metal.NewDefault()
	if err != nil {
		d.Error = err.Error()
		return nil, nil
	}
	d.Name = dev.Name()
	d.GPUFamily = dev.Family()
	d.SupportsKernels = dev.SupportsKernels()
	d.RecommendedMaxWorkingSetBytes = uint64(dev.RecommendedMaxWorkingSetSize())
	d.MaxBufferBytes = int64(dev.MaxBufferLength())
	results, err := dev.CompileUnits()
	if err != nil {
		d.Error = err.Error()
		dev.Close()
		return nil, nil
	}
	for _, r := range results {
		d.Kernels = append(d.Kernels, KernelFamily{File: r.Unit, OK: r.Err == nil, Error: errorText(r.Err), Warnings: r.Warnings})
	}
	return dev, func() { dev.Close() }
}
