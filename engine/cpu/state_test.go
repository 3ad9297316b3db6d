package cpu

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/internal/prompttest"
	"github.com/suzuran-app/suzuran/engine/model"
)

// TestStateWrittenAndReadBack checks that a snapshot written out
// (WriteSnapshot) and read back by another backend on the same weights
// (ReadSnapshot, as a later process would) gives the logits of the
// sequence that computed the prefix, bit for bit, in the exact and the
// fast path, for a text prefix and one that ends inside a document. The
// prefix is computed in two pieces in both, so the arithmetic is the same
// and no tolerance applies.
func TestStateWrittenAndReadBack(t *testing.T) {
	for _, ref := range fixtures.ModelsNamed(t, fixtures.TinyHF, fixtures.TinyMLX) {
		docIDs, docCut := prompttest.DocumentPrompt(t, ref.Dir, 4)
		for _, precision := range []Precision{PrecisionExact, PrecisionFast} {
			t.Run(ref.Name+"/"+string(precision), func(t *testing.T) {
				opt := Options{Precision: precision}
				b, w := openModel(t, ref.Dir, opt)
				for _, c := range []struct {
					name string
					ids  []int
					cut  int
				}{{"text", ref.Prompt, 60}, {"document", docIDs, docCut}} {
					computed, _ := b.NewSequence(len(c.ids))
					prefillPieces(t, b, w, computed, c.ids[:c.cut], 17)
					var buf bytes.Buffer
					snap, err := computed.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					if err := b.WriteSnapshot(&buf, snap); err != nil {
						t.Fatal(err)
					}
					want := prefillPieces(t, b, w, computed, c.ids[c.cut:])

					other, err := New(w, opt)
					if err != nil {
						t.Fatal(err)
					}
					if other.StateFormat() != b.StateFormat() {
						t.Fatalf("two backends of the same options name formats %q and %q", other.StateFormat(), b.StateFormat())
					}
					read, err := other.ReadSnapshot(bytes.NewReader(buf.Bytes()))
					if err != nil {
						t.Fatal(err)
					}
					if read.Pos() != c.cut || read.Bytes() != snap.Bytes() {
						t.Fatalf("%s: read back at %d with %d bytes, written at %d with %d", c.name, read.Pos(), read.Bytes(), c.cut, snap.Bytes())
					}
					loaded, _ := other.NewSequence(len(c.ids) + 8)
					if err := loaded.Restore(read); err != nil {
						t.Fatal(err)
					}
					got := prefillPieces(t, other, w, loaded, c.ids[c.cut:])
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%s: logit %d after a snapshot read back is %v, after computing the prefix %v", c.name, i, got[i], want[i])
						}
					}
					t.Logf("%s: %d-token prefix, %d bytes, %d logits equal", c.name, c.cut, buf.Len(), len(want))

					// Every cut-short copy fails to read.
					for _, n := range []int{0, 7, buf.Len() / 3, buf.Len() - 1} {
						if _, err := other.ReadSnapshot(bytes.NewReader(buf.Bytes()[:n])); err == nil {
							t.Fatalf("%s: a snapshot cut to %d of %d bytes was read", c.name, n, buf.Len())
						}
					}
				}
			})
		}
	}
}

// TestStateFormatNamesWhatChangesTheState checks that the precision and
// the kernels are part of the format, so that a snapshot computed in the
// fast path is never read back into the exact one.
func TestStateFormatNamesWhatChangesTheState(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyMLX)
	fast, w := openModel(t, ref.Dir, Options{Precision: PrecisionFast})
	exact, err := New(w, Options{Precision: PrecisionExact})
	if err != nil {
		t.Fatal(err)
	}
	generic, err := New(w, Options{Precision: PrecisionFast, ISA: ISAGeneric})
	if err != nil {
		t.Fatal(err)
	}
	if fast.StateFormat() == exact.StateFormat() {
		t.Errorf("fast and exact share the state format %q", fast.StateFormat())
	}
	if fast.Kernels().ISA != ISAGeneric && fast.StateFormat() == generic.StateFormat() {
		t.Errorf("%s and generic kernels share the state format %q", fast.Kernels().ISA, fast.StateFormat())
	}
	// Another model's snapshot (other layer shapes) does not read.
	alt := fixtures.Model(t, fixtures.AltHF)
	ab, aw := openModel(t, alt.Dir, Options{})
	seq, _ := ab.NewSequence(16)
	prefillPieces(t, ab, aw, seq, alt.Prompt[:8])
	snap, _ := seq.Snapshot()
	var buf bytes.Buffer
	if err := ab.WriteSnapshot(&buf, snap); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(w.Config) == fmt.Sprint(aw.Config) {
		t.Fatal("the two fixture models have the same config")
	}
	if _, err := exact.ReadSnapshot(&buf); err == nil {
		t.Error("a snapshot of a model of other shapes was read")
	} else {
		t.Log(err)
	}
	if err := exact.WriteSnapshot(io.Discard, snap); err == nil {
		t.Error("a backend wrote another backend's snapshot")
	}
}

var _ model.StateCodec = (*Backend)(nil)
