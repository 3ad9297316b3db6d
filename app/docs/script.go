package docs

import (
	"sync"
	"unicode"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// script is the writing a legacy encoding is made for, which decides what
// its decoding of a text should look like.
type script int

const (
	scriptAlphabet    script = iota // single-byte encodings: Latin, Cyrillic, Greek, …
	scriptJapanese                  // Shift_JIS, EUC-JP
	scriptSimplified                // GB18030, GBK
	scriptTraditional               // Big5
	scriptKorean                    // EUC-KR
)

// scriptOf gives the script of an encoding by its canonical name.
func scriptOf(name string) script {
	switch name {
	case "Shift_JIS", "EUC-JP":
		return scriptJapanese
	case "GB18030", "GBK":
		return scriptSimplified
	case "Big5":
		return scriptTraditional
	case "EUC-KR":
		return scriptKorean
	}
	return scriptAlphabet
}

// plausibility scores how well text reads as the script its encoding is
// made for; the decoding of the right encoding scores highest. It judges
// what decodings of the wrong encoding give away:
//
//   - kana, which only Japanese is written with (Chinese text never has
//     it, though GB2312 and Big5 can encode it);
//   - Hangul in short runs between spaces and punctuation, as Korean is
//     written (Chinese bytes read as EUC-KR give long runs, and hanja);
//   - Han characters among the common ones of the encoding's own standard
//     (GB2312 level 1, Big5's frequent characters, JIS X 0208 level 1):
//     another encoding's bytes mostly land on rare ones;
//   - for alphabets, words in one script with a sensible case pattern,
//     and accented Latin letters inside words that have plain ones; bytes
//     of a CJK encoding read as Windows-125x give words of mixed case and
//     symbols;
//   - replacement characters (bytes that do not decode), symbols and
//     private-use characters cost.
//
// ASCII counts for nothing: every candidate decodes it the same way.
func plausibility(text string, s script) float64 {
	common := commonHan()
	runes := []rune(text)
	score := 0.0
	for i := 0; i < len(runes); {
		r := runes[i]
		switch {
		case r < 0x80:
			i++
			continue
		case s == scriptAlphabet && unicode.IsLetter(r):
			j := i
			for j < len(runes) && unicode.IsLetter(runes[j]) {
				j++
			}
			score += wordScore(runes[i:j])
			i = j
			continue
		case s == scriptKorean && isHangul(r):
			j := i
			for j < len(runes) && isHangul(runes[j]) {
				j++
			}
			score += hangulScore(runes[i:j], common)
			i = j
			continue
		}
		score += runeScore(r, s, common)
		i++
	}
	return score
}

// runeScore scores one character outside the runs plausibility judges
// whole.
func runeScore(r rune, s script, common map[rune]script) float64 {
	cjk := s != scriptAlphabet
	switch {
	case r == '\ufffd':
		return -3
	case isKana(r):
		if s == scriptJapanese {
			return 2
		}
		return -1
	case unicode.Is(unicode.Han, r):
		if s == scriptKorean {
			return -1 // hanja are rare in today's Korean
		}
		if cs, ok := common[r]; ok && cs&bit(s) != 0 {
			return 1.5
		}
		return -0.5
	case r >= 0xFF61 && r <= 0xFF9F: // half-width katakana
		return -1
	case cjk && (r >= 0x3000 && r <= 0x303F || r >= 0xFF01 && r <= 0xFF5E):
		return 1 // CJK punctuation and full-width forms
	case !cjk && isTypography(r):
		return 0.5
	case unicode.IsSpace(r):
		return 0
	}
	return -1
}

// hangulScore scores a run of Hangul syllables: the 2,350 of KS X 1001
// are what Korean text is written with (the others are reached by UHC's
// extension, where other encodings' bytes land), in words of a few
// syllables between spaces.
func hangulScore(run []rune, common map[rune]script) float64 {
	per := 2.0
	if len(run) > 6 {
		per = 0.5
	}
	score := 0.0
	for _, r := range run {
		if common[r]&bit(scriptKorean) != 0 {
			score += per
		} else {
			score--
		}
	}
	return score
}

// wordScore scores a word (a run of letters) of a single-byte encoding's
// decoding.
func wordScore(word []rune) float64 {
	ascii, other := 0, 0
	var sc *unicode.RangeTable
	mixed := false
	for _, r := range word {
		if r < 0x80 {
			ascii++
			continue
		}
		other++
		t := letterScript(r)
		if sc != nil && t != sc {
			mixed = true
		}
		sc = t
	}
	if other == 0 {
		return 0
	}
	switch {
	case mixed || sc == nil:
		return -float64(other)
	case sc == unicode.Latin:
		// Accented letters live inside words with plain ones ("café");
		// a word of accented letters alone is another script's bytes.
		if ascii > 0 || len(word) == 1 {
			return float64(other)
		}
		return -float64(other)
	case ascii > 0:
		return -float64(other) // Latin and another alphabet in one word
	case !sensibleCase(word):
		return -float64(other)
	case len(word) == 1:
		return 0 // a letter alone says nothing
	case allUpper(word):
		return 0.5 * float64(other) // capitals are rarer than lower case
	}
	return float64(other)
}

// letterScript names the alphabet of a non-ASCII letter; nil for one of
// none of them.
func letterScript(r rune) *unicode.RangeTable {
	for _, t := range []*unicode.RangeTable{unicode.Latin, unicode.Cyrillic, unicode.Greek, unicode.Arabic, unicode.Hebrew, unicode.Thai} {
		if unicode.Is(t, r) {
			return t
		}
	}
	return nil
}

// sensibleCase reports whether a word is lower case, Title case or all
// capitals (scripts without case pass).
func sensibleCase(word []rune) bool {
	upper := 0
	for _, r := range word {
		if unicode.IsUpper(r) {
			upper++
		}
	}
	return upper == 0 || upper == len(word) || upper == 1 && unicode.IsUpper(word[0])
}

func allUpper(word []rune) bool {
	for _, r := range word {
		if !unicode.IsUpper(r) {
			return false
		}
	}
	return true
}

// isTypography reports the punctuation a Windows-125x text uses beyond
// ASCII: quotes, dashes, the ellipsis, the no-break space, currency signs.
func isTypography(r rune) bool {
	switch r {
	case '\u00a0', '«', '»', '‘', '’', '“', '”', '„', '–', '—', '…', '€', '£', '°', '§', '№', '©', '®', '·':
		return true
	}
	return false
}

func isKana(r rune) bool { return r >= 0x3041 && r <= 0x30FF && r != 0x30FB }

func isHangul(r rune) bool { return r >= 0xAC00 && r <= 0xD7A3 }

func bit(s script) script { return 1 << s }

var (
	commonHanOnce sync.Once
	commonHanSet  map[rune]script
)

// commonHan maps each common character to the scripts whose standard
// lists it among its common ones (a bit per script): GB2312 level 1 (rows
// 16–55), Big5's frequently used characters (0xA440–0xC67E), JIS X 0208
// level 1 (rows 16–47), and KS X 1001's Hangul syllables (rows 16–40). It
// is built once by decoding those byte ranges.
func commonHan() map[rune]script {
	commonHanOnce.Do(func() {
		commonHanSet = make(map[rune]script, 12000)
		add := func(enc encoding.Encoding, s script, leads [2]byte, trails [][2]byte) {
			dec := enc.NewDecoder()
			for lead := int(leads[0]); lead <= int(leads[1]); lead++ {
				for _, tr := range trails {
					for trail := int(tr[0]); trail <= int(tr[1]); trail++ {
						out, err := dec.Bytes([]byte{byte(lead), byte(trail)})
						if err != nil {
							continue
						}
						for _, r := range string(out) {
							if unicode.Is(unicode.Han, r) || isHangul(r) {
								commonHanSet[r] |= bit(s)
							}
						}
					}
				}
			}
		}
		add(simplifiedchinese.GBK, scriptSimplified, [2]byte{0xB0, 0xD7}, [][2]byte{{0xA1, 0xFE}})
		add(traditionalchinese.Big5, scriptTraditional, [2]byte{0xA4, 0xC6}, [][2]byte{{0x40, 0x7E}, {0xA1, 0xFE}})
		add(japanese.EUCJP, scriptJapanese, [2]byte{0xB0, 0xCF}, [][2]byte{{0xA1, 0xFE}})
		add(korean.EUCKR, scriptKorean, [2]byte{0xB0, 0xC8}, [][2]byte{{0xA1, 0xFE}})
	})
	return commonHanSet
}
