package grammar

import (
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's CPU time: on a shared machine the wall time of a
// benchmark includes waiting for a core, its CPU time does not.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// reportPerStep reports wall and CPU nanoseconds per constraint step.
func reportPerStep(b *testing.B, cpuStart time.Duration, steps int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
	b.ReportMetric(float64((cpuTime()-cpuStart).Nanoseconds())/float64(steps), "cpu-ns/step")
}

// benchDocument is a document of boundedSchema, as a model might write it.
const benchDocument = `{"name": "Tama", "mood": "calm", "count": 3, "ok": true, "tags": ["cat", "grey"], "where": {"x": 1.5, "y": -2}}`

// BenchmarkStep measures one decode step's constraint work on the demo
// model's vocabulary once the grammar's masks are warm (a server that
// keeps compiled schemas, or any step after a state's first visit): Mask
// over a logits row, Accept of the token, Done. ns/step is the number to
// read.
func BenchmarkStep(b *testing.B) {
	_, tok, vocab := demoModel(b)
	g, err := JSONSchema(vocab, []byte(boundedSchema), Options{})
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(benchDocument)
	logits := make([]float32, vocab.width)
	run := func() {
		c := g.NewConstraint()
		for _, id := range ids {
			c.Mask(logits)
			if err := c.Accept(id); err != nil {
				b.Fatal(err)
			}
			c.Done()
		}
	}
	run() // warm the masks
	cpu := cpuTime()
	for b.Loop() {
		run()
	}
	reportPerStep(b, cpu, b.N*len(ids))
}

// BenchmarkColdRequest is the same document through a freshly compiled
// grammar each time: the schema's compilation and every mask computed on
// first use, the cost of a schema the server has not seen before.
func BenchmarkColdRequest(b *testing.B) {
	_, tok, vocab := demoModel(b)
	ids := tok.Encode(benchDocument)
	logits := make([]float32, vocab.width)
	cpu := cpuTime()
	for b.Loop() {
		g, err := JSONSchema(vocab, []byte(boundedSchema), Options{})
		if err != nil {
			b.Fatal(err)
		}
		c := g.NewConstraint()
		for _, id := range ids {
			c.Mask(logits)
			if err := c.Accept(id); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerStep(b, cpu, b.N*len(ids))
}

// syntheticTokenizer stands in for the full model's 248,077-token
// vocabulary, which the repository does not carry: the demo's tokens plus
// merges of random pairs of them, as byte-level BPE builds its vocabulary.
type syntheticTokenizer struct{ pieces [][]byte }

func (s *syntheticTokenizer) VocabSize() int           { return len(s.pieces) }
func (s *syntheticTokenizer) TokenBytes(id int) []byte { return s.pieces[id] }
func (s *syntheticTokenizer) IsSpecial(int) bool       { return false }

// BenchmarkFullSizeVocabulary measures the two costs on a vocabulary of
// the full model's size: a cold mask (a state's first visit) and a warm
// step.
func BenchmarkFullSizeVocabulary(b *testing.B) {
	_, tok, _ := demoModel(b)
	const size = 248320
	syn := &syntheticTokenizer{}
	seen := map[string]bool{}
	for id := range tok.VocabSize() {
		if p := tok.TokenBytes(id); len(p) > 0 && !tok.IsSpecial(id) && !seen[string(p)] {
			seen[string(p)] = true
			syn.pieces = append(syn.pieces, p)
		}
	}
	base := len(syn.pieces)
	rng := rand.New(rand.NewPCG(1, 2))
	for len(syn.pieces) < size-1 {
		p := slices.Concat(syn.pieces[rng.IntN(base)], syn.pieces[rng.IntN(len(syn.pieces))])
		if len(p) <= 16 && !seen[string(p)] {
			seen[string(p)] = true
			syn.pieces = append(syn.pieces, p)
		}
	}
	syn.pieces = append(syn.pieces, []byte{}) // the EOS slot
	vocab, err := NewVocabulary(syn, []int{size - 1}, size)
	if err != nil {
		b.Fatal(err)
	}
	// Token the document greedily by longest piece, as BPE roughly would.
	index := map[string]int{}
	for id, p := range syn.pieces {
		index[string(p)] = id
	}
	var ids []int
	for doc := benchDocument; doc != ""; {
		for n := min(16, len(doc)); n > 0; n-- {
			if id, ok := index[doc[:n]]; ok {
				ids = append(ids, id)
				doc = doc[n:]
				break
			}
		}
	}
	logits := make([]float32, size)
	b.Run("cold", func(b *testing.B) {
		var states int
		cpu := cpuTime()
		for b.Loop() {
			g, err := JSONSchema(vocab, []byte(boundedSchema), Options{})
			if err != nil {
				b.Fatal(err)
			}
			c := g.NewConstraint()
			for _, id := range ids {
				c.Mask(logits)
				if err := c.Accept(id); err != nil {
					b.Fatal(err)
				}
			}
			states = len(g.dfa.states)
		}
		reportPerStep(b, cpu, b.N*len(ids))
		b.ReportMetric(float64(states), "dfa-states")
	})
	b.Run("warm", func(b *testing.B) {
		g, err := JSONSchema(vocab, []byte(boundedSchema), Options{})
		if err != nil {
			b.Fatal(err)
		}
		run := func() {
			c := g.NewConstraint()
			for _, id := range ids {
				c.Mask(logits)
				if err := c.Accept(id); err != nil {
					b.Fatal(err)
				}
			}
		}
		run()
		cpu := cpuTime()
		for b.Loop() {
			run()
		}
		reportPerStep(b, cpu, b.N*len(ids))
	})
	b.Run("string-state-mask", func(b *testing.B) {
		// The costliest mask: inside a string, nearly every token fits.
		// One op is a compile and one cold mask.
		cpu := cpuTime()
		for b.Loop() {
			g, err := JSONSchema(vocab, []byte(`{"type":"string"}`), Options{})
			if err != nil {
				b.Fatal(err)
			}
			c := g.NewConstraint()
			if err := c.Accept(index[`"`]); err != nil {
				b.Fatal(err)
			}
			c.Mask(logits)
		}
		reportPerStep(b, cpu, b.N)
	})
}
