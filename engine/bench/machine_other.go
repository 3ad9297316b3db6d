//go:build !linux && !darwin

package bench

import "runtime"

func platformInfo() (cpu string, mem int64, osName string) { return "", 0, runtime.GOOS }

// PeakRSS is not measured on this system.
func PeakRSS() int64 { return 0 }

// LoadAverage is not measured on this system.
func LoadAverage() [3]float64 { return [3]float64{} }
