package engine

import (
	"strings"
	"testing"
)

func TestStopMatcher(t *testing.T) {
	cases := []struct {
		name    string
		stops   []string
		pieces  []string
		want    string // everything emitted, flush included
		stopped bool
		stopAt  int // index of the piece that completes the stop
	}{
		{"no stops", nil, []string{"a", "b"}, "ab", false, 0},
		{"within one piece", []string{"END"}, []string{"abc", "xENDy", "z"}, "abcx", true, 1},
		{"across pieces", []string{"END"}, []string{"abE", "N", "Dzz"}, "ab", true, 2},
		{"false start released", []string{"END"}, []string{"abE", "Nx", "y"}, "abENxy", false, 0},
		{"earliest of two", []string{"world", "lo w"}, []string{"hel", "lo wor", "ld"}, "hel", true, 1},
		{"held tail flushed at the end", []string{"</stop>"}, []string{"text </st"}, "text </st", false, 0},
		{"stop at the very start", []string{"x"}, []string{"x", "y"}, "", true, 0},
		{"multi-byte characters", []string{"終わり"}, []string{"これで終", "わり", "です"}, "これで", true, 1},
		{"empty stop ignored", []string{""}, []string{"a"}, "a", false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newStopMatcher(c.stops)
			var got strings.Builder
			stopped, at := false, -1
			for i, p := range c.pieces {
				out, s := m.add(p)
				got.WriteString(out)
				if s {
					stopped, at = true, i
					break
				}
			}
			if !stopped {
				got.WriteString(m.flush())
			}
			if got.String() != c.want || stopped != c.stopped || (stopped && at != c.stopAt) {
				t.Fatalf("emitted %q, stopped %v at piece %d; want %q, %v at %d",
					got.String(), stopped, at, c.want, c.stopped, c.stopAt)
			}
		})
	}
}

// Text that cannot begin a stop string is emitted with the piece that
// brought it, not held until later: streaming must not lag.
func TestStopMatcherHoldsOnlyWhatCouldMatch(t *testing.T) {
	m := newStopMatcher([]string{"<|user|>"})
	if out, _ := m.add("Hello <|us"); out != "Hello " {
		t.Fatalf("emitted %q, want %q", out, "Hello ")
	}
	if out, _ := m.add("e"); out != "" {
		t.Fatalf("emitted %q while the stop string could still complete", out)
	}
	if out, _ := m.add("d"); out != "<|used" {
		t.Fatalf("emitted %q, want the released %q", out, "<|used")
	}
}
