package gpu

import (
	"bytes"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/internal/prompttest"
	"github.com/suzuran-app/suzuran/engine/model"
)

// TestStateWrittenAndReadBack checks on the emulator that a snapshot
// written out and read back by another backend on another device (as a
// later process would) gives, bit for bit, the logits and the greedy
// tokens of the sequence that computed the prefix, for a text prefix and
// one that ends inside a document, with the default bf16 KV cache and
// with f32. Both sides run the same passes after the prefix, so no
// tolerance applies.
func TestStateWrittenAndReadBack(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyHF)
	docIDs, docCut := prompttest.DocumentPrompt(t, ref.Dir, 3)
	m, err := checkpoint.Load(ref.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := m.Weights
	for _, opt := range []Options{{}, {KVCacheF32: true}} {
		b, err := New(openTestDevice(t, 0), w, opt)
		if err != nil {
			t.Fatal(err)
		}
		other, err := New(openTestDevice(t, 1), w, opt)
		if err != nil {
			t.Fatal(err)
		}
		if other.StateFormat() != b.StateFormat() {
			t.Fatalf("formats %q and %q for the same options", other.StateFormat(), b.StateFormat())
		}
		greedy := &model.Sampling{}
		after := func(b *Backend, seq model.Sequence, ids []int) ([]float32, []int) {
			r, err := model.Run(b, w, seq, model.Input{IDs: ids, Logits: model.LogitsAll, Sample: greedy})
			if err != nil {
				t.Fatal(err)
			}
			logits, toks := r.Logits, []int{r.Token}
			for range 2 {
				r, err := model.Run(b, w, seq, model.Input{Logits: model.LogitsLast, Sample: greedy})
				if err != nil {
					t.Fatal(err)
				}
				logits, toks = append(logits, r.Logits...), append(toks, r.Token)
			}
			return logits, toks
		}
		for _, c := range []struct {
			name string
			ids  []int
			cut  int
		}{{"text", ref.Prompt[:48], 30}, {"document", docIDs, docCut}} {
			computed, err := b.NewSequence(len(c.ids) + 8)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := model.Run(b, w, computed, model.Input{IDs: c.ids[:c.cut]}); err != nil {
				t.Fatal(err)
			}
			snap, err := computed.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := b.WriteSnapshot(&buf, snap); err != nil {
				t.Fatal(err)
			}
			want, wantIDs := after(b, computed, c.ids[c.cut:])

			read, err := other.ReadSnapshot(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			loaded, err := other.NewSequence(len(c.ids) + 40)
			if err != nil {
				t.Fatal(err)
			}
			if err := loaded.Restore(read); err != nil {
				t.Fatal(err)
			}
			got, gotIDs := after(other, loaded, c.ids[c.cut:])
			if len(got) != len(want) {
				t.Fatalf("%s: %d logits after a snapshot read back, %d after computing", c.name, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s %s: logit %d after a snapshot read back is %v, after computing the prefix %v", b.StateFormat(), c.name, i, got[i], want[i])
				}
			}
			if !equalIDs(gotIDs, wantIDs) {
				t.Fatalf("%s: tokens %v after a snapshot read back, %v after computing", c.name, gotIDs, wantIDs)
			}
			t.Logf("%s %s: %d-token prefix, %d bytes, %d logits equal", b.StateFormat(), c.name, c.cut, buf.Len(), len(want))
			for _, n := range []int{0, 9, buf.Len() / 2, buf.Len() - 1} {
				if _, err := other.ReadSnapshot(bytes.NewReader(buf.Bytes()[:n])); err == nil {
					t.Fatalf("%s: a snapshot cut to %d of %d bytes was read", c.name, n, buf.Len())
				}
			}
		}
	}
}

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
