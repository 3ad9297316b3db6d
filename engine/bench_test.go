package engine

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/model"
)

// BenchmarkEngineOverhead compares the engine (queue, prefix cache,
// streaming, stop rules, detokenizer) with the bare model loop — prefill,
// then greedy decode steps through model.Run — on the demo model, whose
// passes are so cheap that any overhead of the engine shows. Both decode
// the 48-token answer to "Explain itertools.chain." from scratch (the
// engine's cache is off).
func BenchmarkEngineOverhead(b *testing.B) {
	c := greedyCases(b)[3]
	b.Run("model loop", func(b *testing.B) {
		backend, w := demoBackend(b)
		seq, err := backend.NewSequence(256)
		if err != nil {
			b.Fatal(err)
		}
		empty, _ := seq.Snapshot()
		greedy := &model.Sampling{}
		for b.Loop() {
			seq.Restore(empty)
			res, err := model.Prefill(backend, w, seq, c.PromptIDs, 0, model.Input{Sample: greedy})
			if err != nil {
				b.Fatal(err)
			}
			for range len(c.GreedyIDs) - 1 {
				if res, err = model.Run(backend, w, seq, model.Input{Sample: greedy}); err != nil {
					b.Fatal(err)
				}
			}
			_ = res
		}
		b.ReportMetric(float64(len(c.GreedyIDs)*b.N)/b.Elapsed().Seconds(), "tokens/s")
	})
	b.Run("engine", func(b *testing.B) {
		e := loadDemo(b, "cpu", LoadOptions{CacheBytes: -1})
		for b.Loop() {
			ids, _, _ := collect(b, e, Request{Prompt: c.PromptIDs, MaxTokens: len(c.GreedyIDs)})
			if len(ids) != len(c.GreedyIDs) {
				b.Fatalf("%d tokens, want %d", len(ids), len(c.GreedyIDs))
			}
		}
		b.ReportMetric(float64(len(c.GreedyIDs)*b.N)/b.Elapsed().Seconds(), "tokens/s")
	})
}
