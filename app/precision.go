package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/engine/cpu"
)

// The --precision flag of the commands that open a cpu backend (chat, serve,
// logits, bench): the arithmetic of its products with quantized weights.

// precisionUsage is the flag's help.
const precisionUsage = "cpu backend arithmetic: fast (int16 activations in integer dot products, within 5e-3 of exact), " +
	"exact (f32, the reference) or int8 (int8 activations: least accurate, and slower than fast on this build's kernels; see BENCHMARKS.md)"

// addPrecisionFlag adds --precision to cmd, defaulting to fast.
func addPrecisionFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "precision", string(cpu.PrecisionFast), precisionUsage)
}

// checkPrecision validates --precision: a precision the cpu backend knows,
// and given only with the cpu backend (the GPU backends choose their own).
func checkPrecision(cmd *cobra.Command, backend, precision string) error {
	if _, err := cpu.ParsePrecision(precision); err != nil {
		return fmt.Errorf("--precision: %w", err)
	}
	if backend != "cpu" && cmd.Flags().Changed("precision") {
		return fmt.Errorf("--precision %s: only the cpu backend has a choice of precision; drop the flag for --backend %s", precision, backend)
	}
	return nil
}

// isaChoices lists the instruction sets this machine's cpu backend runs,
// best first, for --isa's help.
func isaChoices() string {
	var names []string
	for _, isa := range cpu.ISAs() {
		names = append(names, string(isa))
	}
	return strings.Join(names, ", ")
}
