package cpu

import "golang.org/x/sys/cpu"

// machineKernels lists the levels this CPU runs, best first: AVX-512 VNNI
// (needs VL for the 256-bit forms the kernels use, BW for the 512-bit
// activation rounding), AVX2 with FMA, then
// the Go loops.
func machineKernels() []kernelSet {
	var levels []kernelSet
	avx2 := cpu.X86.HasAVX2 && cpu.X86.HasFMA
	f32 := simdKernels{q4Row: q4RowAVX2, q4Dequant: q4DequantAVX2, dot4: dot4AVX2, dot4x2: dot4x2AVX2, dot: dotAVX2,
		deltaStep: deltaStepAVX2, axpy: axpyAVX2, gemm6x16: gemm6x16AVX2, dotBF16: dotBF16AVX2,
		scores4: attentionScores4AVX2, values4: attentionValues4AVX2}
	if avx2 && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW {
		levels = append(levels, kernelSet{isa: ISAVNNI, f32: f32,
			q8: q8Kernels{q4: q4TileVNNI, q4Split: q4SplitTileVNNI, q8: q8TileVNNI,
				w4: w4TileVNNI, w4Split: w4SplitTileVNNI, w8: w8TileVNNI, w4Quad: w4QuadVNNI, w8Quad: w8QuadVNNI,
				w4Rows: [3]func(*q8Tile){w4Rows1VNNI, w4Rows2VNNI, w4Rows4VNNI},
				w8Rows: [3]func(*q8Tile){w8Rows1VNNI, w8Rows2VNNI, w8Rows4VNNI},
				w4Pair: w4Pair4VNNI, w8Pair: w8Pair4VNNI,
				absMax: absMaxAVX512, quantW16: quantW16AVX512}})
	}
	if avx2 {
		levels = append(levels, kernelSet{isa: ISAAVX2, f32: f32,
			q8: q8Kernels{q4: q4TileAVX2, q4Split: q4SplitTileAVX2, q8: q8TileAVX2,
				w4: w4TileAVX2, w4Split: w4SplitTileAVX2, w8: w8TileAVX2, w4Quad: w4QuadAVX2, w8Quad: w8QuadAVX2,
				w4Rows: [3]func(*q8Tile){w4Rows1AVX2, w4Rows2AVX2, w4Rows4AVX2},
				w8Rows: [3]func(*q8Tile){w8Rows1AVX2, w8Rows2AVX2, w8Rows4AVX2}}})
	}
	return append(levels, kernelSet{isa: ISAGeneric})
}

//go:noescape
func q4TileVNNI(t *q8Tile)

//go:noescape
func q4SplitTileVNNI(t *q8Tile)

//go:noescape
func q8TileVNNI(t *q8Tile)

//go:noescape
func q4TileAVX2(t *q8Tile)

//go:noescape
func q4SplitTileAVX2(t *q8Tile)

//go:noescape
func q8TileAVX2(t *q8Tile)

//go:noescape
func w4TileVNNI(t *q8Tile)

//go:noescape
func w4SplitTileVNNI(t *q8Tile)

//go:noescape
func w8TileVNNI(t *q8Tile)

//go:noescape
func w4TileAVX2(t *q8Tile)

//go:noescape
func w4SplitTileAVX2(t *q8Tile)

//go:noescape
func w8TileAVX2(t *q8Tile)

//go:noescape
func w4QuadVNNI(t *q8Tile)

//go:noescape
func w8QuadVNNI(t *q8Tile)

//go:noescape
func w4QuadAVX2(t *q8Tile)

//go:noescape
func w8QuadAVX2(t *q8Tile)

//go:noescape
func absMaxAVX512(x *float32, n int) float32

//go:noescape
func quantW16AVX512(x *float32, n int, inv float32, levels int32, xq *byte, perm *uint16) int32

//go:noescape
func w4Rows1VNNI(t *q8Tile)

//go:noescape
func w4Rows2VNNI(t *q8Tile)

//go:noescape
func w4Rows4VNNI(t *q8Tile)

//go:noescape
func w8Rows1VNNI(t *q8Tile)

//go:noescape
func w8Rows2VNNI(t *q8Tile)

//go:noescape
func w8Rows4VNNI(t *q8Tile)

//go:noescape
func w4Rows1AVX2(t *q8Tile)

//go:noescape
func w4Rows2AVX2(t *q8Tile)

//go:noescape
func w4Rows4AVX2(t *q8Tile)

//go:noescape
func w8Rows1AVX2(t *q8Tile)

//go:noescape
func w8Rows2AVX2(t *q8Tile)

//go:noescape
func w8Rows4AVX2(t *q8Tile)

//go:noescape
func w4Pair4VNNI(t *q8Tile)

//go:noescape
func w8Pair4VNNI(t *q8Tile)
