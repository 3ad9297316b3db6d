package grammar

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// TestUTF8Sequences: the byte-range sequences of a rune range match the
// UTF-8 encoding of a rune exactly when the rune is in the range.
func TestUTF8Sequences(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	edges := []rune{0, 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xffff, 0x10000, 0x10ffff}
	pick := func() rune {
		if rng.IntN(2) == 0 {
			return edges[rng.IntN(len(edges))] + rune(rng.IntN(3)) - 1
		}
		return rune(rng.IntN(0x110000))
	}
	matches := func(seqs [][]byteRange, b []byte) bool {
		for _, seq := range seqs {
			if len(seq) != len(b) {
				continue
			}
			ok := true
			for i, r := range seq {
				ok = ok && r.lo <= b[i] && b[i] <= r.hi
			}
			if ok {
				return true
			}
		}
		return false
	}
	buf := make([]byte, 4)
	for range 2000 {
		lo, hi := pick(), pick()
		if lo > hi {
			lo, hi = hi, lo
		}
		lo, hi = max(lo, 0), min(hi, 0x10ffff)
		seqs := utf8Sequences(lo, hi)
		for range 50 {
			r := pick()
			if r < 0 || r > 0x10ffff || (r >= 0xd800 && r <= 0xdfff) {
				continue
			}
			n := utf8.EncodeRune(buf, r)
			if got, want := matches(seqs, buf[:n]), lo <= r && r <= hi; got != want {
				t.Fatalf("[%#x, %#x]: rune %#x matched %v, want %v (%v)", lo, hi, r, got, want, seqs)
			}
		}
	}
}
