package grammar

// A byte-level NFA built by Thompson's construction. Fragments are wired
// together with epsilon edges; the lazy DFA (dfa.go) determinizes the result
// on demand, so the builder may be as nondeterministic as is convenient
// (anyOf branches that share a prefix, optional members).

// maxStates bounds an automaton's NFA states, so that a schema that unrolls
// into something huge is refused instead of eating memory (the compiler
// also bounds each repetition before unrolling it).
const maxStates = 1 << 18

// byteRange is an inclusive range of byte values.
type byteRange struct{ lo, hi byte }

type edge struct {
	byteRange
	to int32
}

type nfaState struct {
	eps   []int32
	edges []edge
}

type nfa struct {
	states []nfaState
	// tooBig is set once the automaton passes maxStates; the compiler
	// checks it after building and reports the schema as too large.
	tooBig bool
}

// frag is a piece of automaton from in to out; out has no edges yet, so
// that the next piece can be attached to it.
type frag struct{ in, out int32 }

func (n *nfa) state() int32 {
	if len(n.states) >= maxStates {
		n.tooBig = true
	}
	n.states = append(n.states, nfaState{})
	return int32(len(n.states) - 1)
}

func (n *nfa) epsilon(from, to int32) {
	n.states[from].eps = append(n.states[from].eps, to)
}

// empty matches the empty string.
func (n *nfa) empty() frag {
	s := n.state()
	return frag{s, s}
}

// class matches one byte in any of the ranges.
func (n *nfa) class(ranges ...byteRange) frag {
	in, out := n.state(), n.state()
	for _, r := range ranges {
		n.states[in].edges = append(n.states[in].edges, edge{r, out})
	}
	return frag{in, out}
}

// lit matches s exactly.
func (n *nfa) lit(s string) frag {
	in := n.state()
	cur := in
	for i := 0; i < len(s); i++ {
		next := n.state()
		n.states[cur].edges = append(n.states[cur].edges, edge{byteRange{s[i], s[i]}, next})
		cur = next
	}
	return frag{in, cur}
}

// seq matches its parts one after the other.
func (n *nfa) seq(parts ...frag) frag {
	if len(parts) == 0 {
		return n.empty()
	}
	for i := 1; i < len(parts); i++ {
		n.epsilon(parts[i-1].out, parts[i].in)
	}
	return frag{parts[0].in, parts[len(parts)-1].out}
}

// alt matches any one of its parts.
func (n *nfa) alt(parts ...frag) frag {
	in, out := n.state(), n.state()
	for _, p := range parts {
		n.epsilon(in, p.in)
		n.epsilon(p.out, out)
	}
	return frag{in, out}
}

// opt matches f or nothing.
func (n *nfa) opt(f frag) frag { return n.alt(f, n.empty()) }

// star matches f any number of times, none included.
func (n *nfa) star(f frag) frag {
	in, out := n.state(), n.state()
	n.epsilon(in, f.in)
	n.epsilon(in, out)
	n.epsilon(f.out, in)
	return frag{in, out}
}

// repeat matches between lo and hi copies of what build makes (hi < 0:
// unbounded); build is called once per copy, as a fragment serves one
// place in the automaton.
func (n *nfa) repeat(lo, hi int, build func() frag) frag {
	parts := make([]frag, 0, lo+1)
	for range lo {
		parts = append(parts, build())
	}
	switch {
	case hi < 0:
		parts = append(parts, n.star(build()))
	case hi > lo:
		// Nested optionals (x(x(x)?)?)? rather than a chain of independent
		// ones, so that each length has one path.
		tail := n.opt(build())
		for range hi - lo - 1 {
			tail = n.opt(n.seq(build(), tail))
		}
		parts = append(parts, tail)
	}
	return n.seq(parts...)
}

// until matches any bytes that do not contain stop, followed by stop: the
// Knuth–Morris–Pratt automaton of stop with an exit after its last byte.
func (n *nfa) until(stop string) frag {
	states := make([]int32, len(stop)+1)
	for i := range states {
		states[i] = n.state()
	}
	// fail[k] is the length of the longest proper border of stop[:k].
	fail := make([]int, len(stop)+1)
	for k := 2; k <= len(stop); k++ {
		f := fail[k-1]
		for f > 0 && stop[f] != stop[k-1] {
			f = fail[f]
		}
		if stop[f] == stop[k-1] {
			f++
		}
		fail[k] = f
	}
	for k := 0; k < len(stop); k++ {
		target := func(c byte) int32 {
			next := k
			for next > 0 && stop[next] != c {
				next = fail[next]
			}
			if stop[next] == c {
				next++
			}
			return states[next]
		}
		// One edge per run of bytes with the same target.
		lo := 0
		for c := 1; c <= 256; c++ {
			if c == 256 || target(byte(c)) != target(byte(lo)) {
				n.states[states[k]].edges = append(n.states[states[k]].edges, edge{byteRange{byte(lo), byte(c - 1)}, target(byte(lo))})
				lo = c
			}
		}
	}
	return frag{states[0], states[len(stop)]}
}
