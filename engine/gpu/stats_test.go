package gpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/model"
)

// TestCounters checks the pipeline rules on the tiny model: one command
// buffer per pass, at most one host wait per decode token, no readback
// inside a step, and planned decode traffic within 1.15× of the minimum.
// The decode steps are pipelined as the engine runs them: step N+1 is
// submitted before the host waits on step N, and the tokens must equal a
// run that waits after every step.
func TestCounters(t *testing.T) {
	for _, ref := range fixtureModels(t) {
		t.Run(ref.name, func(t *testing.T) {
			b, w := openModel(t, ref.dir)
			const chunk = 64
			steps := len(ref.genIDs) - 1
			seq, err := b.NewSequence(len(ref.prompt) + steps + 1)
			if err != nil {
				t.Fatal(err)
			}
			greedy := &model.Sampling{}
			res, err := model.Prefill(b, w, seq, ref.prompt, chunk, model.Input{Sample: greedy})
			if err != nil {
				t.Fatal(err)
			}
			ids := []int{res.Token}
			// Pipelined decode: submit step N+1, then wait on step N.
			prev, err := model.Start(b, w, seq, model.Input{Sample: greedy})
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < steps; i++ {
				next, err := model.Start(b, w, seq, model.Input{Sample: greedy})
				if err != nil {
					t.Fatal(err)
				}
				r, err := prev.Wait()
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.Token)
				prev = next
			}
			r, err := prev.Wait()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.Token)
			if fmt.Sprint(ids) != fmt.Sprint(ref.genIDs) {
				t.Fatalf("pipelined greedy continuation after a chunked prefill\n got %v\nwant %v", ids, ref.genIDs)
			}

			s := b.Stats()
			t.Logf("\n%s", strings.Join(s.Lines(), "\n"))
			d, p := s.Decode, s.Prefill
			if d.Passes != int64(steps) {
				t.Fatalf("%d decode passes counted, ran %d", d.Passes, steps)
			}
			if d.CommandBuffers != d.Passes {
				t.Errorf("decode: %d command buffers for %d tokens, want one per token", d.CommandBuffers, d.Passes)
			}
			if d.HostWaits > d.Passes {
				t.Errorf("decode: %d host waits for %d tokens, want at most one per token", d.HostWaits, d.Passes)
			}
			if d.MidStepReadbacks != 0 || p.MidStepReadbacks != 0 {
				t.Errorf("mid-step readbacks: decode %d, prefill %d, want 0", d.MidStepReadbacks, p.MidStepReadbacks)
			}
			wantChunks := int64((len(ref.prompt) + chunk - 1) / chunk)
			if p.Passes != wantChunks || p.CommandBuffers != p.Passes {
				t.Errorf("prefill: %d command buffers for %d chunks (want %d chunks, one buffer each)", p.CommandBuffers, p.Passes, wantChunks)
			}
			ratio := float64(d.ReadBytes+d.WriteBytes) / float64(d.MinimumBytes)
			t.Logf("decode planned/minimum bytes: %.4f", ratio)
			if ratio > 1.15 {
				t.Errorf("decode plans %.3f× the minimum traffic, want at most 1.15×", ratio)
			}
		})
	}
}
