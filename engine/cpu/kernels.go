package cpu

import (
	"fmt"
	"strings"
)

// ISA names a level of the CPU's vector instructions for the kernels to
// use. The zero value picks the best this machine has; naming a lower one
// runs its fallback (that is how the tests check every level on one
// machine).
type ISA string

const (
	// ISAAuto picks the best level the machine has.
	ISAAuto ISA = ""
	// ISAVNNI is amd64 with AVX-512 VNNI and VL: vpdpbusd for the int8
	// products, AVX2 and FMA for the rest.
	ISAVNNI ISA = "vnni"
	// ISAAVX2 is amd64 with AVX2 and FMA.
	ISAAVX2 ISA = "avx2"
	// ISANEON is arm64's Advanced SIMD: the int16 kernels of the fast
	// precision on any arm64 CPU, the int8 ones (sdot) where it has the
	// dot-product extension.
	ISANEON ISA = "neon"
	// ISAGeneric is the Go loops, on any machine.
	ISAGeneric ISA = "generic"
)

// Precision chooses the arithmetic of the products with quantized weights.
type Precision string

const (
	// PrecisionFast quantizes activations to int16 per weight group and
	// multiplies them with the affine weights' codes in integer dot
	// products (q8.go): within 5e-3 of the reference logits on the
	// fixtures, like the GPU's half path. The default.
	PrecisionFast Precision = "fast"
	// PrecisionInt8 quantizes activations to int8 per weight group, as
	// llama.cpp's Q8 products do. This is the one place that says who it
	// is for: whoever compares this engine with llama.cpp's arithmetic
	// (the same rounding of the activations) or measures what int8
	// activations cost in accuracy and gain in speed. It is not for
	// everyday use, and never the default: on the fixtures' random tiny
	// models its rounding (½ step of max|x|/127) grows through the layers
	// to 0.2–0.3 of the largest logit, far past their bar; on the trained
	// demo model, teacher-forced, it agrees with the exact path on 99% of
	// the top-1 tokens with perplexity within 0.1% (fast: 100%, 0.0001%;
	// TestTeacherForcedPrecision holds both); and with only one-token tile
	// kernels (q4Tile, q4SplitTile, q8Tile), none of the fast path's
	// multi-row ones, it takes more CPU than fast (BENCHMARKS.md). Its
	// kernels stay for that comparison; the flag's help and the package
	// doc say only that it is the least accurate.
	PrecisionInt8 Precision = "int8"
	// PrecisionExact multiplies f32 activations with the dequantized
	// weights: the reference the fixtures verify.
	PrecisionExact Precision = "exact"
)

// ParsePrecision reads a --precision flag value ("" is the default, fast).
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(strings.ToLower(s)); p {
	case "":
		return PrecisionFast, nil
	case PrecisionFast, PrecisionExact, PrecisionInt8:
		return p, nil
	}
	return "", fmt.Errorf("precision %q: choose fast (int16 activations in integer products, the default), "+
		"exact (f32, the reference) or int8 (int8 activations: least accurate)", s)
}

// quantizedActivations says whether the affine products run q8.go's
// integer kernels.
func (b *Backend) quantizedActivations() bool {
	return b.precision == PrecisionFast || b.precision == PrecisionInt8
}

// kernelSet is one ISA level's kernels: the f32 assembly of the exact path
// and the int8 kernels of the fast path; nil entries run the Go loops.
type kernelSet struct {
	isa ISA
	f32 simdKernels
	q8  q8Kernels
}

// kernelsFor returns the kernels of the named level, or the best level
// this machine has for ISAAuto; an error names the levels it has.
func kernelsFor(isa ISA) (kernelSet, error) {
	levels := machineKernels() // best first, generic last
	isa = ISA(strings.ToLower(string(isa)))
	if isa == ISAAuto {
		return levels[0], nil
	}
	var names []string
	for _, k := range levels {
		if k.isa == isa {
			return k, nil
		}
		names = append(names, string(k.isa))
	}
	return kernelSet{}, fmt.Errorf("instruction set %q: this CPU runs %s", isa, strings.Join(names, ", "))
}

// ISAs lists the levels this machine can run, best first.
func ISAs() []ISA {
	var out []ISA
	for _, k := range machineKernels() {
		out = append(out, k.isa)
	}
	return out
}

// KernelInfo says which kernels a backend runs, for reports.
type KernelInfo struct {
	ISA       ISA       `json:"isa"`
	Precision Precision `json:"precision"`
}

func (k KernelInfo) String() string { return fmt.Sprintf("%s, %s precision", k.ISA, k.Precision) }
