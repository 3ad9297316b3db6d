package grammar

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/suzuran-app/suzuran/engine"
)

// Grammar is a compiled output language (a JSON schema, a tool call) over
// one Vocabulary. It is safe for concurrent use, and worth keeping for
// repeated requests: the automaton and the token masks it computes on the
// way are shared by every Constraint made from it.
type Grammar struct {
	dfa *dfa
}

// NewConstraint starts a constraint for one request (engine.Request's
// Constraint field).
func (g *Grammar) NewConstraint() *Constraint {
	return &Constraint{g: g, state: g.dfa.start}
}

// Constraint follows one request's output through a Grammar; it
// implements engine.Constraint.
type Constraint struct {
	g     *Grammar
	state int32
	ended bool // an EOS token was accepted
	// budget is the tokens the request may still generate (WithBudget);
	// 0: none set. closing: the budget ruled tokens out. keep is
	// maskBudget's scratch.
	budget  int
	closing bool
	keep    []bool
}

var _ engine.Constraint = (*Constraint)(nil)

var negInf = float32(math.Inf(-1))

// Mask sets the logits of the tokens that may not come next to −Inf.
func (c *Constraint) Mask(logits []float32) {
	if c.ended {
		fillNegInf(logits)
		return
	}
	mask, _ := c.g.dfa.maskOf(c.state)
	for w := 0; w < len(mask); w++ {
		word := mask[w]
		base := w * 64
		switch {
		case word == ^uint64(0):
		case word == 0:
			// A run of ruled-out words is filled by copying, which is
			// what most steps of a structural state spend their time on.
			end := w + 1
			for end < len(mask) && mask[end] == 0 {
				end++
			}
			fillNegInf(logits[min(base, len(logits)):min(end*64, len(logits))])
			w = end - 1
		default:
			// Only the ruled-out ids of a mixed word.
			for out := ^word; out != 0; out &= out - 1 {
				if i := base + bits.TrailingZeros64(out); i < len(logits) {
					logits[i] = negInf
				}
			}
		}
	}
	if n := len(mask) * 64; n < len(logits) {
		fillNegInf(logits[n:])
	}
	c.maskBudget(logits)
}

// negInfBlock is copied over ruled-out runs of logits.
var negInfBlock = func() []float32 {
	b := make([]float32, 4096)
	for i := range b {
		b[i] = negInf
	}
	return b
}()

func fillNegInf(dst []float32) {
	for len(dst) > 0 {
		dst = dst[copy(dst, negInfBlock):]
	}
}

// Accept advances past token, or returns an error if the grammar does not
// allow it here.
func (c *Constraint) Accept(token int) error {
	d := c.g.dfa
	v := d.vocab
	if c.budget > 0 {
		c.budget--
	}
	if c.ended {
		return fmt.Errorf("token %d after the end of the constrained text", token)
	}
	if v.isEOS(token) {
		if !d.accepting(c.state) {
			return fmt.Errorf("end of text (token %d) before the constrained text is complete", token)
		}
		c.ended = true
		return nil
	}
	if token < 0 || token >= len(v.pieces) || v.pieces[token] == nil {
		return fmt.Errorf("token %d cannot appear in constrained text", token)
	}
	next := d.walk(c.state, v.pieces[token])
	if next == dead {
		return fmt.Errorf("token %d (%q) does not fit the constrained text here", token, v.pieces[token])
	}
	c.state = next
	return nil
}

// Done reports that the text is complete: nothing but EOS could follow.
func (c *Constraint) Done() bool {
	if c.ended {
		return true
	}
	_, done := c.g.dfa.maskOf(c.state)
	return done
}
