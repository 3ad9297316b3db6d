//go:build !darwin && !linux

package machine

// probe knows only what Go's runtime does on other systems.
func probe(*Facts) {}

// Available is not known on this system: 0.
func Available() int64 { return 0 }

// LoadAverage is not measured on this system.
func LoadAverage() [3]float64 { return [3]float64{} }

// PeakRSS is not measured on this system.
func PeakRSS() int64 { return 0 }
