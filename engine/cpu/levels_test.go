package cpu

import (
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// kernelCalls counts the calls of the attention and DeltaNet entries of a
// counted table.
type kernelCalls struct {
	scores4, values4, deltaStep, dot4, axpy atomic.Int64
}

// countKernels returns k with its attention and DeltaNet entries (those it
// has) wrapped to count their calls before running the real kernel.
func countKernels(k kernelSet) (kernelSet, *kernelCalls) {
	n := new(kernelCalls)
	f := &k.f32
	counted(&f.scores4, &n.scores4)
	counted(&f.values4, &n.values4)
	counted(&f.deltaStep, &n.deltaStep)
	counted(&f.dot4, &n.dot4)
	counted(&f.axpy, &n.axpy)
	return k, n
}

// counted wraps the kernel *entry, unless it is nil, to add 1 to calls
// before running it.
func counted[F any](entry *F, calls *atomic.Int64) {
	kernel := reflect.ValueOf(*entry)
	if kernel.IsNil() {
		return
	}
	*entry = reflect.MakeFunc(kernel.Type(), func(args []reflect.Value) []reflect.Value {
		calls.Add(1)
		return kernel.Call(args)
	}).Interface().(F)
}

// emptyF32 says whether every entry of an f32 table is nil (the Go loops).
func emptyF32(k *simdKernels) bool {
	v := reflect.ValueOf(k).Elem()
	for i := range v.NumField() {
		if !v.Field(i).IsNil() {
			return false
		}
	}
	return true
}

// TestForcedLevelReachesHelpers checks that the instruction set a backend
// is given is the one its attention and DeltaNet run, on two fixture
// models (attention heads of 64 and 32, DeltaNet key heads of 32 and 24:
// all within the assembly's sizes), exact precision, through a prompt and
// three decode steps:
//
//   - a level with assembly runs its own table's attention and DeltaNet
//     kernels (scores4, values4 and deltaStep on amd64; axpy, which
//     attention's value loop calls without values4, and deltaStep on
//     arm64): each backend's table is wrapped with counters, which a
//     helper reading any other table would leave at zero;
//   - the generic level's table is empty (no entry to run but the Go
//     loops), and its outputs differ in some bit from the assembly levels'
//     (fused vs separately rounded products, on fixed data), so the
//     comparison below is between different code; a level without f32
//     assembly (arm64's neon, whose assembly is the integer kernels) gives
//     the Go loops' bits;
//   - levels sharing one f32 table (vnni and avx2) agree bit for bit;
//   - every level agrees with the Go loops within 5e-5 of the largest
//     value of each output (hidden states after every layer, logits): the
//     levels differ only in the rounding of f32 sums, and each lands within
//     1.4e-5 of the float64 reference on the fixtures (fixture_test.go), so
//     within 2.8e-5 of another (measured: 1.6e-5 at most, on the
//     alternative model's later layers); an indexing mistake is off by the
//     size of the values.
func TestForcedLevelReachesHelpers(t *testing.T) {
	for _, ref := range fixtures.ModelsNamed(t, fixtures.TinyMLX, fixtures.AltHF) {
		t.Run(ref.Name, func(t *testing.T) {
			type run struct {
				isa     ISA
				f32     simdKernels
				outputs [][]float32 // hidden states per layer, then logits
			}
			var runs []run
			for _, level := range machineKernels() {
				b, w := openModel(t, ref.Dir, Options{Precision: PrecisionExact, ISA: level.isa})
				if b.kern.isa != level.isa {
					t.Fatalf("asked for %s, the backend runs %s", level.isa, b.kern.isa)
				}
				var calls *kernelCalls
				b.kern, calls = countKernels(b.kern)
				outputs := runForLevels(t, b, w, ref)
				f := &level.f32
				switch {
				case level.isa == ISAGeneric:
					if !emptyF32(f) {
						t.Fatalf("the generic level's f32 table has assembly entries")
					}
				case emptyF32(f):
					t.Logf("%s: no f32 assembly (the Go loops)", level.isa)
				default:
					for _, c := range []struct {
						name string
						has  bool
						n    int64
					}{
						{"scores4", f.scores4 != nil, calls.scores4.Load()},
						{"values4", f.values4 != nil, calls.values4.Load()},
						{"deltaStep", f.deltaStep != nil, calls.deltaStep.Load()},
						// Without values4, attention's value loop is axpy,
						// which nothing else in a pass calls.
						{"axpy", f.values4 == nil && f.axpy != nil, calls.axpy.Load()},
					} {
						if c.has && c.n == 0 {
							t.Errorf("%s: the backend's %s kernel never ran", level.isa, c.name)
						}
						if c.has {
							t.Logf("%s: %s called %d times", level.isa, c.name, c.n)
						}
					}
				}
				runs = append(runs, run{level.isa, level.f32, outputs})
			}
			generic := runs[len(runs)-1]
			for _, r := range runs[:len(runs)-1] {
				if emptyF32(&r.f32) {
					if !sameRows(r.outputs, generic.outputs) {
						t.Errorf("%s has no f32 assembly but does not give the Go loops' outputs", r.isa)
					}
					continue
				}
				if sameRows(r.outputs, generic.outputs) {
					t.Errorf("%s gives the generic level's outputs bit for bit: one of them does not run its own kernels", r.isa)
				}
				for i, out := range r.outputs {
					if e := fixtures.RelError(out, generic.outputs[i]); !(e <= 5e-5) {
						t.Errorf("%s output %d: %.3g of the largest value from the Go loops", r.isa, i, e)
					} else {
						t.Logf("%s output %d: %.2e from the Go loops", r.isa, i, e)
					}
				}
			}
			for i := range runs {
				for j := range i {
					if reflect.ValueOf(runs[i].f32.dot4).Pointer() == reflect.ValueOf(runs[j].f32.dot4).Pointer() &&
						runs[i].f32.dot4 != nil && !sameRows(runs[i].outputs, runs[j].outputs) {
						t.Errorf("%s and %s share their f32 kernels but not their outputs", runs[i].isa, runs[j].isa)
					}
				}
			}
		})
	}
}

// runForLevels runs ref's prompt, then three greedy decode steps, and
// returns the hidden states after every layer of the prompt and the
// logits of every step.
func runForLevels(t *testing.T, b *Backend, w *model.Weights, ref *fixtures.Reference) [][]float32 {
	t.Helper()
	seq, res := readPrompt(t, b, w, ref, 3)
	greedy := &model.Sampling{}
	outputs := append(res.Hidden, res.Logits)
	for range 3 {
		r, err := model.Run(b, w, seq, model.Input{Logits: model.LogitsLast, Sample: greedy})
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, r.Logits)
	}
	return outputs
}

// sameRows compares two lists of rows bit for bit.
func sameRows(a, b [][]float32) bool { return slices.EqualFunc(a, b, sameBits) }
