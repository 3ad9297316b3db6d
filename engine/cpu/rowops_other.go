//go:build !amd64

package cpu

// convRowFor is the conv's row kernel: the Go loop.
func convRowFor(ISA) func(out, rows []float32, stride int, taps []float32, k int) { return convRowGo }

// scaleAddFor is y[i] += a·x[i]: the Go loop.
func scaleAddFor(ISA) func(y, x []float32, a float32) { return scaleAddGo }
