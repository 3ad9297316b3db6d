package grammar

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestMaskIsExact walks the demo vocabulary token by token through several
// grammars and checks each step's mask against brute force (every token's
// bytes walked from the current state): the sorted-vocabulary walk must
// neither miss a token nor allow one that leads nowhere. Every allowed
// token must be accepted, and the text written must be in the language.
func TestMaskIsExact(t *testing.T) {
	_, tok, vocab := demoModel(t)
	eos := vocab.eos[0]
	fns, _ := functionsOf(t, weatherTools)
	grammars := map[string]func() (*Grammar, error){
		"json_object": func() (*Grammar, error) { return JSONObject(vocab, Options{}) },
		"schema":      func() (*Grammar, error) { return JSONSchema(vocab, []byte(schemaCases[0].schema), Options{}) },
		"thinking": func() (*Grammar, error) {
			return JSONSchema(vocab, []byte(schemaCases[1].schema), Options{Thinking: true})
		},
		"tool call": func() (*Grammar, error) { return ToolCall(vocab, fns, Options{ParallelToolCalls: true}) },
	}
	for name, compile := range grammars {
		t.Run(name, func(t *testing.T) {
			g, err := compile()
			if err != nil {
				t.Fatal(err)
			}
			dist := distances(t, g)
			rng := rand.New(rand.NewPCG(3, uint64(len(name))))
			logits := make([]float32, vocab.width)
			for walk := range 8 {
				c := g.NewConstraint()
				var text strings.Builder
				budget := 10 + rng.IntN(60)
				for steps := 0; ; steps++ {
					if steps > 2000 {
						t.Fatalf("walk %d did not end: %q", walk, text.String())
					}
					for i := range logits {
						logits[i] = 0
					}
					c.Mask(logits)
					var allowed []int
					for id, l := range logits {
						want := g.dfa.walk(c.state, vocab.pieces[id]) != dead && vocab.pieces[id] != nil
						if id == eos {
							want = g.dfa.accepting(c.state)
						}
						got := !math.IsInf(float64(l), -1)
						if got != want {
							t.Fatalf("walk %d after %q: token %d (%q) allowed %v, brute force says %v", walk, text.String(), id, vocab.pieces[id], got, want)
						}
						if got {
							allowed = append(allowed, id)
						}
					}
					if len(allowed) == 0 {
						t.Fatalf("walk %d after %q: no token allowed", walk, text.String())
					}
					// Random tokens, then the ones that bring the end closest.
					pick := allowed[rng.IntN(len(allowed))]
					if steps >= budget {
						best := math.MaxInt
						for _, id := range allowed {
							d := 0
							if id != eos {
								d = dist[g.dfa.walk(c.state, vocab.pieces[id])]
							}
							if d < best {
								best, pick = d, id
							}
						}
					}
					if err := c.Accept(pick); err != nil {
						t.Fatalf("walk %d after %q: %v", walk, text.String(), err)
					}
					if pick != eos {
						text.Write(tok.TokenBytes(pick))
					}
					if c.Done() {
						break
					}
				}
				if !accepts(g, text.String()) {
					t.Fatalf("walk %d wrote %q, which the grammar does not accept", walk, text.String())
				}
			}
		})
	}
}

// TestConstraintEnds: after the closing brace nothing may follow (Done),
// EOS is allowed exactly where the text may end, and tokens outside the
// grammar are refused with an error that names them.
func TestConstraintEnds(t *testing.T) {
	_, tok, vocab := demoModel(t)
	eos := vocab.eos[0]
	g, err := JSONSchema(vocab, []byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := g.NewConstraint()
	if err := c.Accept(eos); err == nil {
		t.Error("EOS accepted before any text")
	}
	ids := tok.Encode(`{"a": 12`)
	for _, id := range ids {
		if err := c.Accept(id); err != nil {
			t.Fatalf("%q: %v", tok.TokenBytes(id), err)
		}
	}
	if c.Done() {
		t.Fatal("done before the closing brace")
	}
	x, _ := tok.TokenID("x")
	if err := c.Accept(x); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("accepting x: %v, want an error naming it", err)
	}
	closing, _ := tok.TokenID("}")
	if err := c.Accept(closing); err != nil {
		t.Fatal(err)
	}
	if !c.Done() {
		t.Fatal("not done after the closing brace")
	}
	logits := make([]float32, vocab.width+5)
	c.Mask(logits)
	for id, l := range logits {
		if (id == eos) != !math.IsInf(float64(l), -1) {
			t.Fatalf("after the object, token %d has logit %v: only EOS may remain", id, l)
		}
	}

	// A top-level number may end or go on: EOS and digits are allowed.
	num, err := JSONSchema(vocab, []byte(`{"type":"integer"}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c = num.NewConstraint()
	seven, _ := tok.TokenID("7")
	if err := c.Accept(seven); err != nil {
		t.Fatal(err)
	}
	logits = make([]float32, vocab.width)
	c.Mask(logits)
	if c.Done() || math.IsInf(float64(logits[eos]), -1) || math.IsInf(float64(logits[seven]), -1) {
		t.Fatalf("after 7: done %v, EOS logit %v, 7 logit %v", c.Done(), logits[eos], logits[seven])
	}
	if err := c.Accept(eos); err != nil || !c.Done() {
		t.Fatalf("EOS after 7: %v, done %v", err, c.Done())
	}
}

func TestThinkingPrefix(t *testing.T) {
	_, _, vocab := demoModel(t)
	g, err := JSONObject(vocab, Options{Thinking: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"</think>{}", "Let me think: {x} <b>\n</think>\n\n{\"a\":1}"} {
		if !accepts(g, text) {
			t.Errorf("refused %q", text)
		}
	}
	for _, text := range []string{"{}", "a</think>b</think>{}", "a</think>\n\n\n{}"} {
		if accepts(g, text) {
			t.Errorf("accepted %q", text)
		}
	}
}
