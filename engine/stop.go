package engine

import "strings"

// stopMatcher finds stop strings in streamed text that arrives in arbitrary
// pieces (a token's text, or less when a character spans tokens). It holds
// back the shortest tail that could still grow into a stop string, so a stop
// string split across tokens is found and none of it is ever emitted, while
// everything that cannot be part of one is emitted at once.
type stopMatcher struct {
	stops []string
	held  string
	// matched is the stop string that ended the text, once one did (the
	// earliest in the text; of two starting there, the first listed).
	matched string
}

func newStopMatcher(stops []string) *stopMatcher {
	var nonEmpty []string
	for _, s := range stops {
		if s != "" {
			nonEmpty = append(nonEmpty, s)
		}
	}
	return &stopMatcher{stops: nonEmpty}
}

// add takes the next piece of text and returns what may be emitted now, and
// whether a stop string was completed; after a stop, the text up to the
// earliest stop string is returned and the rest is dropped.
func (m *stopMatcher) add(piece string) (emit string, stopped bool) {
	if len(m.stops) == 0 {
		return piece, false
	}
	buf := m.held + piece
	// The earliest complete stop string ends the text. Held text never
	// contains a whole stop string (it would have been found when it
	// arrived), so any match involves the new piece.
	first := -1
	for _, s := range m.stops {
		if i := strings.Index(buf, s); i >= 0 && (first < 0 || i < first) {
			first, m.matched = i, s
		}
	}
	if first >= 0 {
		m.held = ""
		return buf[:first], true
	}
	keep := 0
	for _, s := range m.stops {
		keep = max(keep, overlap(buf, s))
	}
	m.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// flush returns the held text at the end of generation: no stop string can
// complete any more.
func (m *stopMatcher) flush() string {
	out := m.held
	m.held = ""
	return out
}

// overlap is the length of the longest proper prefix of stop that is a
// suffix of text.
func overlap(text, stop string) int {
	for n := min(len(stop)-1, len(text)); n > 0; n-- {
		if strings.HasSuffix(text, stop[:n]) {
			return n
		}
	}
	return 0
}
