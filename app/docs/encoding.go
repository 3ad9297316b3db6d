package docs

import (
	"bytes"
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
// text that cannot be UTF-8), else the best guess of the ICU detector
// (github.com/saintfish/chardet) among the legacy encodings x/text
// decodes; Windows-1252 when it has no usable guess, as every byte
// sequence is valid Windows-1252.
func detectEncoding(data []byte) (encoding.Encoding, string) {
	if utf8.Valid(data) {
		return nil, "UTF-8"
	}
	sample := data[:min(len(data), 256<<10)]
	results, err := chardet.NewTextDetector().DetectAll(sample)
	if err == nil {
		// Guesses of equal confidence come in no fixed order; by name
		// among them, so that a file reads the same way every time.
		sort.SliceStable(results, func(i, j int) bool {
			if results[i].Confidence != results[j].Confidence {
				return results[i].Confidence > results[j].Confidence
			}
			return results[i].Charset < results[j].Charset
		})
		// The detector ranks by statistics that short CJK texts can
		// mislead (Chinese read as EUC-JP); among its guesses, the first
		// that decodes the sample without an invalid sequence wins, else
		// the one with the fewest.
		var best encoding.Encoding
		bestName, bestErrors := "", -1
		for _, r := range results {
			if strings.HasPrefix(r.Charset, "UTF-") || strings.HasPrefix(r.Charset, "ISO-2022") {
				continue // UTF-8 was ruled out; the UTF-16/32 and 7-bit guesses need markers we did not see
			}
			enc, err := htmlindex.Get(strings.Replace(r.Charset, "GB-18030", "gb18030", 1))
			if err != nil {
				continue
			}
			invalid := invalidSequences(enc, sample)
			if bestErrors < 0 || invalid < bestErrors {
				name, _ := htmlindex.Name(enc)
				best, bestName, bestErrors = enc, canonicalName(name), invalid
			}
			if invalid == 0 {
				break
			}
		}
		if best != nil {
			return best, bestName
		}
	}
	enc, _ := htmlindex.Get("windows-1252")
	return enc, "Windows-1252"
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
