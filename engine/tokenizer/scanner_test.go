package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// scannerAlphabet mixes every class the Qwen regexes distinguish, with the
// characters where they are easy to get wrong: each kind of white space and
// line break, marks of all three kinds (Mn, Mc, Me) and the variation
// selector, letters and numbers beyond the BMP, apostrophe contractions in
// both cases, and the Unicode case-folding traps ſ (long s) and K (Kelvin).
var scannerAlphabet = []string{
	"a", "b", "Z", "é", "ß", "ж", "λ", "ا", "日", "本", "ア", "한", "𝐀", "𐐷",
	"0", "7", "٣", "½", "Ⅻ", "𝟘",
	"\u0301", "\u0308", "\u093F", "\u20DD", "\uFE0F", "\u200D",
	".", ",", "!", "(", ")", "-", "_", "'", "\"", "#", "€", "😀", "👍", "🇯", "\u00AD",
	" ", " ", " ", "\t", "\n", "\n", "\r", "\r\n", "\v", "\f", "\u0085", "\u00A0", "\u2028", "\u3000", "\uFEFF",
	"'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'Ll", "'d", "'x", "'ſ", "'\u212A",
	"hello", " world", "  ", "\n\n", " \n ",
}

func randomText(r *rand.Rand, alphabet []string, maxParts int) string {
	var b strings.Builder
	for n := r.IntN(maxParts + 1); n > 0; n-- {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// The hand-written scanner must cut exactly where regexp2 running the
// original pattern does.
func TestScannerMatchesRegexp2(t *testing.T) {
	iterations := 60000
	if testing.Short() {
		iterations = 6000
	}
	for _, p := range []struct {
		name      string
		pattern   string
		withMarks bool
	}{
		{"qwen3", qwen2Pattern, false},
		{"qwen3.5", qwen35Pattern, true},
	} {
		re, err := newRegexSplitter(p.pattern)
		if err != nil {
			t.Fatal(err)
		}
		sc := newQwenScanner(p.withMarks)
		r := rand.New(rand.NewPCG(1, uint64(len(p.name))))
		fails := 0
		for i := 0; i < iterations && fails < 10; i++ {
			s := randomText(r, scannerAlphabet, 24)
			if i%2 == 1 {
				s = randomRunes(r, 12)
			}
			want := re.split(s, nil)
			got := sc.split(s, nil)
			if !slices.Equal(got, want) {
				fails++
				t.Errorf("%s: %q\n scanner %q\n regexp2 %q", p.name, s, pieces(s, got), pieces(s, want))
			}
		}
	}
}

func pieces(s string, ends []int) []string {
	var out []string
	start := 0
	for _, e := range ends {
		out = append(out, s[start:e])
		start = e
	}
	return out
}

// randomRunes draws characters from anywhere in Unicode (ASCII, the BMP and
// the astral planes), so that the class tables meet every category.
func randomRunes(r *rand.Rand, maxLen int) string {
	var b strings.Builder
	for n := r.IntN(maxLen + 1); n > 0; n-- {
		var c rune
		switch r.IntN(4) {
		case 0:
			c = rune(r.IntN(0x80))
		case 1:
			c = rune(r.IntN(0x10000))
		case 2:
			c = rune(r.IntN(0x110000))
		default:
			c = []rune{' ', '\n', '\r', '\'', 's', 'A', '\u0301', '1'}[r.IntN(8)]
		}
		if utf8.ValidRune(c) {
			b.WriteRune(c)
		}
	}
	return b.String()
}
