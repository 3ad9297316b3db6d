package docs

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/saintfish/chardet"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
	"golang.org/x/text/transform"
)

// TextEncodings are the encodings a user can choose for a text file
// (Options.Encoding) when the detected one reads wrong: UTF-8 and the
// common legacy encodings of Japanese, Chinese, Korean, Cyrillic and
// European text.
var TextEncodings = []string{
	"UTF-8", "Shift_JIS", "EUC-JP", "GB18030", "Big5", "EUC-KR",
	"Windows-1251", "KOI8-R", "Windows-1252", "Windows-1250", "ISO-8859-2", "Windows-1253", "Windows-1254",
}

// textEncoding looks up one of TextEncodings (case does not matter); nil
// for UTF-8.
func textEncoding(name string) (encoding.Encoding, string, error) {
	for _, known := range TextEncodings {
		if !strings.EqualFold(known, name) {
			continue
		}
		if known == "UTF-8" {
			return nil, known, nil
		}
		enc, err := htmlindex.Get(known)
		if err != nil {
			break
		}
		return enc, known, nil
	}
	return nil, "", fmt.Errorf("no text encoding %q: choose one of %s", name, strings.Join(TextEncodings, ", "))
}

// bomEncoding recognises a Unicode byte order mark. UTF-32 LE is tested
// before UTF-16 LE, whose mark is its prefix.
func bomEncoding(data []byte) (enc encoding.Encoding, name string, ok bool) {
	switch {
	case bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}):
		return unicode.UTF8BOM, "UTF-8", true
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE, 0, 0}):
		return utf32.UTF32(utf32.LittleEndian, utf32.ExpectBOM), "UTF-32LE", true
	case bytes.HasPrefix(data, []byte{0, 0, 0xFE, 0xFF}):
		return utf32.UTF32(utf32.BigEndian, utf32.ExpectBOM), "UTF-32BE", true
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		return unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM), "UTF-16LE", true
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		return unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM), "UTF-16BE", true
	}
	return nil, "", false
}

// detectEncoding names the encoding of text without a byte order mark:
// UTF-8 when the bytes are valid UTF-8 (the detector is only asked about
// text that cannot be UTF-8), else the legacy encoding (among the common
// ones and the guesses of the ICU detector, github.com/saintfish/chardet)
// whose decoding reads best as its language's script (see plausibility);
// Windows-1252 when nothing decodes, as every byte sequence is valid
// Windows-1252.
func detectEncoding(data []byte) (encoding.Encoding, string) {
	if utf8.Valid(data) {
		return nil, "UTF-8"
	}
	sample := data[:min(len(data), 256<<10)]
	results, err := chardet.NewTextDetector().DetectAll(sample)
	if err != nil {
		results = nil
	}
	// Guesses of equal confidence come in no fixed order; by name among
	// them, so that a file reads the same way every time.
	sort.SliceStable(results, func(i, j int) bool {
		if results[i].Confidence != results[j].Confidence {
			return results[i].Confidence > results[j].Confidence
		}
		return results[i].Charset < results[j].Charset
	})
	// The detector's statistics need more text than a short note has
	// (a Shift_JIS line of 30 bytes scores 10 in Shift_JIS, GB18030 and
	// Big5 alike, and 26 in Windows-1252), and it can be sure of a
	// single-byte encoding for CJK bytes: every candidate is decoded and
	// judged by how it reads, the detector's confidence breaking near-ties.
	charsets := append([]string(nil), shortTextCandidates...)
	confidence := map[string]float64{}
	for _, r := range results {
		charsets = append(charsets, r.Charset)
		if _, name, ok := legacyEncoding(r.Charset); ok {
			confidence[name] = max(confidence[name], float64(r.Confidence))
		}
	}
	var best encoding.Encoding
	bestName, bestScore, seen := "", 0.0, map[string]bool{}
	for _, charset := range charsets {
		enc, name, ok := legacyEncoding(charset)
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		out, err := enc.NewDecoder().Bytes(sample)
		if err != nil {
			continue
		}
		score := plausibility(strings.TrimSuffix(string(out), "\ufffd"), scriptOf(name)) + confidence[name]/50
		if best == nil || score > bestScore {
			best, bestName, bestScore = enc, name, score
		}
	}
	if best != nil {
		return best, bestName
	}
	enc, _ := htmlindex.Get("windows-1252")
	return enc, "Windows-1252"
}

// shortTextCandidates are the legacy encodings always judged for a short
// text, in the order that breaks a tie: Shift_JIS first (its bytes are the
// least ambiguous), simplified before traditional Chinese, which is before
// EUC-JP (kanji-only Japanese, which is rare, is GB2312's byte range too).
var shortTextCandidates = []string{"shift_jis", "gb18030", "big5", "euc-jp", "euc-kr", "windows-1251", "windows-1252"}

// legacyEncoding looks up a detector's charset name in x/text, skipping
// what detection must not pick: the UTF forms (UTF-8 was ruled out and the
// UTF-16/32 guesses need marks we did not see) and the 7-bit ISO-2022
// forms.
func legacyEncoding(charset string) (encoding.Encoding, string, bool) {
	if strings.HasPrefix(charset, "UTF-") || strings.HasPrefix(charset, "ISO-2022") {
		return nil, "", false
	}
	enc, err := htmlindex.Get(strings.Replace(charset, "GB-18030", "gb18030", 1))
	if err != nil {
		return nil, "", false
	}
	name, _ := htmlindex.Name(enc)
	return enc, canonicalName(name), true
}

// invalidSequences counts the characters that decoding sample with enc
// replaces with U+FFFD (a cut final character aside).
func invalidSequences(enc encoding.Encoding, sample []byte) int {
	out, err := enc.NewDecoder().Bytes(sample)
	if err != nil {
		return len(sample)
	}
	text := strings.TrimSuffix(string(out), "\ufffd")
	return strings.Count(text, "\ufffd")
}

// canonicalName writes the WHATWG encoding names the way people know them.
func canonicalName(whatwg string) string {
	switch whatwg {
	case "shift_jis":
		return "Shift_JIS"
	case "gb18030":
		return "GB18030"
	case "gbk":
		return "GBK"
	case "big5":
		return "Big5"
	case "euc-jp":
		return "EUC-JP"
	case "euc-kr":
		return "EUC-KR"
	}
	if strings.HasPrefix(whatwg, "windows-") {
		return "Windows-" + strings.TrimPrefix(whatwg, "windows-")
	}
	return strings.ToUpper(whatwg)
}

// decodeText turns a text file's bytes into UTF-8, reporting progress
// every megabyte. It returns the encoding's name. A byte order mark is
// dropped; line endings become \n.
func (x *extraction) decodeText(data []byte) (string, string, error) {
	if x.encoding != "" {
		enc, name, err := textEncoding(x.encoding)
		if err != nil {
			return "", "", err
		}
		if bomEnc, _, ok := bomEncoding(data); ok && name == "UTF-8" {
			enc = bomEnc // the mark is not text
		}
		return x.decodeWith(data, enc, name)
	}
	enc, name, ok := bomEncoding(data)
	if !ok {
		enc, name = detectEncoding(data)
	}
	return x.decodeWith(data, enc, name)
}

// decodeWith decodes data from the encoding enc (nil: UTF-8) called name.
func (x *extraction) decodeWith(data []byte, enc encoding.Encoding, name string) (string, string, error) {
	var out []byte
	if enc == nil {
		out = data
		if err := x.check(); err != nil {
			return "", "", err
		}
	} else {
		const chunk = 1 << 20
		decoder := enc.NewDecoder()
		out = make([]byte, 0, len(data)+len(data)/2)
		// A byte of input writes at most 4 bytes of UTF-8 (U+FFFD for a
		// bad byte is 3, a GB18030 sequence of 4 bytes at most 4).
		buf := make([]byte, 4*min(len(data), chunk)+16)
		for src := data; ; {
			if err := x.check(); err != nil {
				return "", "", err
			}
			atEOF := len(src) <= chunk
			n, consumed, err := transformChunk(decoder, buf, src[:min(len(src), chunk)], atEOF)
			out = append(out, buf[:n]...)
			src = src[consumed:]
			if err != nil {
				return "", "", failure(x.name, ErrDamaged, "could not be decoded as %s (%v); save it as UTF-8 text and attach it again", name, err)
			}
			x.report(int64(len(data)-len(src)), int64(len(data)), "bytes")
			if len(src) == 0 {
				break
			}
		}
	}
	return normalizeNewlines(string(out)), name, nil
}

// transformChunk decodes one chunk, holding back an incomplete trailing
// character for the next (consumed < len(src)).
func transformChunk(t transform.Transformer, dst, src []byte, atEOF bool) (int, int, error) {
	n, consumed, err := t.Transform(dst, src, atEOF)
	if err == transform.ErrShortSrc && !atEOF {
		err = nil
	}
	return n, consumed, err
}

// normalizeNewlines turns CRLF and lone CR into LF, which costs fewer tokens
// and reads the same.
func normalizeNewlines(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}
