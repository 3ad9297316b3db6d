package cpu

import "golang.org/x/sys/cpu"

// machineKernels lists the levels this CPU runs, best first: NEON with the
// dot-product extension (sdot, every Apple Silicon Mac and most arm64
// servers), then the Go loops. The sdot kernels serve int8 activations on
// 4-bit weights; the other layouts and the int16 activations of the fast
// precision run the Go loops.
func machineKernels() []kernelSet {
	var levels []kernelSet
	if cpu.ARM64.HasASIMDDP {
		levels = append(levels, kernelSet{isa: ISANEON, q8: q8Kernels{q4: q4TileNEON, q4Split: q4SplitTileNEON}})
	}
	return append(levels, kernelSet{isa: ISAGeneric})
}

//go:noescape
func q4TileNEON(t *q8Tile)

//go:noescape
func q4SplitTileNEON(t *q8Tile)
