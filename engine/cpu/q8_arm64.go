package cpu

import "golang.org/x/sys/cpu"

// machineKernels lists the levels this CPU runs, best first: NEON, then
// the Go loops. NEON (Advanced SIMD, on every arm64 CPU) runs the int16
// kernels of the fast precision on every layout, and, where the CPU has
// the dot-product extension (sdot: every Apple Silicon Mac, most arm64
// servers), the int8 kernels on 4-bit weights, and the f32 dot products,
// axpy and DeltaNet step of kernels_arm64.s and the attention loops of
// attention_arm64.s; the other int8 layouts and the exact path's row and
// prefill loops run the Go loops.
func machineKernels() []kernelSet {
	neon := q8Kernels{w4: w4TileNEON, w4Split: w4SplitTileNEON, w8: w8TileNEON}
	if cpu.ARM64.HasASIMDDP {
		neon.q4, neon.q4Split = q4TileNEON, q4SplitTileNEON
	}
	f32 := simdKernels{dot: dotNEON, dot4: dot4NEON, deltaStep: deltaStepNEON, axpy: axpyNEON,
		scores4: attentionScores4NEON, values4: attentionValues4NEON}
	return []kernelSet{{isa: ISANEON, f32: f32, q8: neon}, {isa: ISAGeneric}}
}

//go:noescape
func q4TileNEON(t *q8Tile)

//go:noescape
func q4SplitTileNEON(t *q8Tile)

//go:noescape
func w4TileNEON(t *q8Tile)

//go:noescape
func w4SplitTileNEON(t *q8Tile)

//go:noescape
func w8TileNEON(t *q8Tile)
