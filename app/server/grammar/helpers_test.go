package grammar

import (
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// demo installs the demo model once for the package's tests.
var demo struct {
	sync.Once
	dir   string
	tok   *tokenizer.Tokenizer
	vocab *Vocabulary
	err   error
}

func demoModel(t testing.TB) (string, *tokenizer.Tokenizer, *Vocabulary) {
	t.Helper()
	demo.Do(func() {
		root, err := os.MkdirTemp("", "suzuran-grammar-test-")
		if err != nil {
			demo.err = err
			return
		}
		if demo.dir, demo.err = models.Install(root); demo.err != nil {
			return
		}
		if demo.tok, demo.err = tokenizer.Load(demo.dir); demo.err != nil {
			return
		}
		eos, _ := demo.tok.TokenID("<|im_end|>")
		demo.vocab, demo.err = NewVocabulary(demo.tok, []int{eos}, demo.tok.VocabSize())
	})
	if demo.err != nil {
		t.Fatal(demo.err)
	}
	return demo.dir, demo.tok, demo.vocab
}

// accepts reports whether the whole of text is in g's language.
func accepts(g *Grammar, text string) bool {
	s := g.dfa.walk(g.dfa.start, []byte(text))
	return s != dead && g.dfa.accepting(s)
}

// distances maps every DFA state reachable from the start to the fewest
// bytes that complete the text from it, exploring the whole automaton.
func distances(t testing.TB, g *Grammar) map[int32]int {
	t.Helper()
	d := g.dfa
	d.mu.Lock()
	defer d.mu.Unlock()
	reverse := map[int32][]int32{}
	seen := map[int32]bool{d.start: true}
	queue := []int32{d.start}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for c := 0; c < 256; c++ {
			next := d.step(s, byte(c))
			if next == dead {
				continue
			}
			reverse[next] = append(reverse[next], s)
			if !seen[next] {
				seen[next] = true
				queue = append(queue, next)
			}
		}
		if len(seen) > 200000 {
			t.Fatalf("more than 200000 DFA states")
		}
	}
	dist := map[int32]int{}
	for s := range seen {
		if d.states[s].accept {
			dist[s] = 0
			queue = append(queue, s)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, p := range reverse[s] {
			if _, ok := dist[p]; !ok {
				dist[p] = dist[s] + 1
				queue = append(queue, p)
			}
		}
	}
	for s := range seen {
		if _, ok := dist[s]; !ok {
			t.Fatalf("DFA state %d is reachable but cannot complete the text: a dead end in the automaton", s)
		}
	}
	return dist
}

// randomText walks g byte by byte: random live bytes for about budget
// bytes, then the bytes that bring the text closest to complete; at an
// accepting state it stops with probability 1/4 (always past the budget).
func randomText(g *Grammar, dist map[int32]int, rng *rand.Rand, budget int) string {
	d := g.dfa
	var out []byte
	s := d.start
	var live []byte
	for {
		d.mu.Lock()
		accept := d.states[s].accept
		live = live[:0]
		for c := 0; c < 256; c++ {
			if d.step(s, byte(c)) != dead {
				live = append(live, byte(c))
			}
		}
		d.mu.Unlock()
		if accept && (len(live) == 0 || len(out) >= budget || rng.IntN(4) == 0) {
			return string(out)
		}
		var c byte
		if len(out) < budget {
			c = live[rng.IntN(len(live))]
		} else {
			best := -1
			for _, b := range live {
				d.mu.Lock()
				dd := dist[d.step(s, b)]
				d.mu.Unlock()
				if best < 0 || dd < best || (dd == best && rng.IntN(2) == 0) {
					best, c = dd, b
				}
			}
		}
		out = append(out, c)
		d.mu.Lock()
		s = d.step(s, c)
		d.mu.Unlock()
	}
}

// validator compiles schema with a well-kept JSON Schema implementation,
// formats asserted.
func validator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return s
}

// validate parses text as JSON and validates it against s.
func validate(s *jsonschema.Schema, text string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(v)
}
