//go:build !darwin

package hub

// gpuWorkingSet is 0 without Metal.
func gpuWorkingSet(bool) int64 { return 0 }
