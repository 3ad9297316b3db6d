//go:build !linux && !darwin

package engine

// availableMemory is not known on this system: 0.
func availableMemory() int64 { return 0 }
