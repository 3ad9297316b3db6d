package cpu

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/batchtest"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// TestBatchExact checks the batched pass's contract on the CPU with
// batchtest's plans: a sequence's logits and tokens are bit for bit those
// of the same sequence run alone, whatever else is in the batch. Four
// sequences join at different steps with different prompts, so the batches
// mix decode steps at different positions with prefill chunks long enough
// for the matrix-product kernels (8 and 12 rows) and short ones (3 rows);
// the Go loops and the assembly kernels are both checked. Tolerance: none
// (bitwise), which is the promise the engine's scheduler relies on.
func TestBatchExact(t *testing.T) {
	for _, ref := range fixtures.ModelsNamed(t, fixtures.TinyHF, fixtures.TinyMLX) {
		t.Run(ref.Name, func(t *testing.T) {
			withKernels(t, func(t *testing.T, k kernelSet) {
				b, w := openModel(t, ref.Dir, Options{ISA: k.isa})
				plans := batchtest.Plans()
				batchtest.Together(t, b, w, plans, batchtest.Alone(t, b, w, plans))
			})
		})
	}
}

// TestBatchRefuses checks what a batch may not hold (batchtest.Refuses):
// a refused batch leaves nothing recording and no sequence moved.
func TestBatchRefuses(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyHF)
	b, w := openModel(t, ref.Dir, Options{})
	batchtest.Refuses(t, b, w)
}
