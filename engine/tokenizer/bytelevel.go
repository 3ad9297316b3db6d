package tokenizer

// The GPT-2 byte-level alphabet: every byte is shown as a printable rune so
// that vocabularies can be stored as text. Printable Latin-1 bytes stand for
// themselves; the other 68 bytes are shifted to U+0100 and up, in byte order.
var byteToRune, runeToByte = buildByteAlphabet()

// alphabetEnd bounds the alphabet's runes (256 + 68 shifted bytes).
const alphabetEnd = 0x144

func buildByteAlphabet() ([256]rune, [alphabetEnd]int16) {
	var b2r [256]rune
	var r2b [alphabetEnd]int16
	for i := range r2b {
		r2b[i] = -1
	}
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	next := rune(256)
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !printable(b) {
			r = next
			next++
		}
		b2r[b] = r
		r2b[r] = int16(b)
	}
	return b2r, r2b
}

// byteLevelToBytes converts a vocabulary string in the byte-level alphabet
// to the raw bytes it stands for. ok is false when the string holds a rune
// outside the alphabet; such tokens decode to their own UTF-8 bytes, as in
// Hugging Face's ByteLevel decoder.
func byteLevelToBytes(s string) (out []byte, ok bool) {
	out = make([]byte, 0, len(s))
	for _, r := range s {
		if r >= alphabetEnd || runeToByte[r] < 0 {
			return []byte(s), false
		}
		out = append(out, byte(runeToByte[r]))
	}
	return out, true
}

// bytesToByteLevel is the inverse of byteLevelToBytes.
func bytesToByteLevel(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = byteToRune[c]
	}
	return string(rs)
}
