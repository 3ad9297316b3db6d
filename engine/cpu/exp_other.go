//go:build !amd64 && !arm64

package cpu

// fastActivations is the fast path's table: the Go loops (expf).
func fastActivations(ISA) *activations { return &goActivations }
