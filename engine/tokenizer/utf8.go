package tokenizer

import "unicode/utf8"

// appendLossyUTF8 appends src to dst as valid UTF-8, replacing each maximal
// invalid subpart with one U+FFFD. This is the substitution rule of Unicode
// §3.9 (and of Rust's String::from_utf8_lossy and the WHATWG decoder), which
// Hugging Face applies when decoding; Go's own conversions differ (one
// U+FFFD per byte, or per run).
//
// With final false, a truncated sequence at the very end of src that could
// still be completed by more bytes is left unconsumed; consumed says how many
// bytes of src were used. Because the rule only ever looks at one maximal
// subpart at a time, decoding in pieces this way gives exactly the same text
// as decoding everything at once.
func appendLossyUTF8(dst, src []byte, final bool) (out []byte, consumed int) {
	i := 0
	for i < len(src) {
		c := src[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		need, lo, hi := sequenceShape(c)
		if need == 0 {
			dst = append(dst, "\uFFFD"...)
			i++
			continue
		}
		// Count the bytes that continue a valid sequence: the second byte
		// has a lead-specific range, the rest are plain continuation bytes.
		k := 1
		for k < need && i+k < len(src) {
			b := src[i+k]
			if k == 1 {
				if b < lo || b > hi {
					break
				}
			} else if b < 0x80 || b > 0xBF {
				break
			}
			k++
		}
		switch {
		case k == need:
			dst = append(dst, src[i:i+need]...)
		case i+k == len(src) && !final:
			return dst, i
		default:
			dst = append(dst, "\uFFFD"...)
		}
		i += k
	}
	return dst, i
}

// sequenceShape gives, for a non-ASCII lead byte, the length of the sequence
// it starts and the allowed range of the second byte (which excludes
// overlong forms and surrogates); need is 0 for a byte that cannot lead.
func sequenceShape(c byte) (need int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2, 0x80, 0xBF
	case c == 0xE0:
		return 3, 0xA0, 0xBF
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		return 3, 0x80, 0xBF
	case c == 0xED:
		return 3, 0x80, 0x9F
	case c == 0xF0:
		return 4, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 4, 0x80, 0xBF
	case c == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}
