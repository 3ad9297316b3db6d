//go:build !amd64 && !arm64

package cpu

// fmaPeak is the machine's peak loop for attention's products, nil where
// there is none; a round is fmaPeakFlops operations.
var fmaPeak func(iters int)

const fmaPeakFlops = 0
