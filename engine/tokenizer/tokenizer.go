package tokenizer

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes and decodes text for one model. It is safe for
// concurrent use.
type Tokenizer struct {
	nfc          bool
	splitter     splitter
	bpe          bpeModel
	ignoreMerges bool
	vocab        map[string]int // byte-level alphabet → id, without added tokens

	// pieces holds the bytes each id decodes to; maxPiece is the longest.
	pieces   [][]byte
	maxPiece int

	added   map[string]addedToken
	special map[int]bool
	// matchers[normalized*2 + withSpecial] finds added tokens: those
	// matched on raw text and those matched after normalisation, with and
	// without the special ones.
	matchers [4]*addedMatcher
}

type addedToken struct {
	id         int
	special    bool
	normalized bool
}

// Encode returns the ids of text with special tokens treated as plain text:
// `<|im_start|>` typed by a user becomes the characters `<`, `|`, … and never
// the control token. Added tokens that are not special (`<think>`,
// `<tool_call>`) are still recognised, as Hugging Face does with
// split_special_tokens. No BOS or EOS is added.
func (t *Tokenizer) Encode(text string) []int {
	return t.encode(text, false)
}

// EncodeWithSpecials returns the ids of text, recognising every added token
// including the special ones; this is what a rendered chat template needs,
// and what Hugging Face's tokenizer.encode does by default.
func (t *Tokenizer) EncodeWithSpecials(text string) []int {
	return t.encode(text, true)
}

// EncodeWithSpecialsUpTo is EncodeWithSpecials for text that may hold more
// than limit tokens: it stops as soon as the count is known to pass limit
// (a piece of text holds at least its length over the longest token's
// tokens, so a long one is refused before it is merged), and then returns
// nil and false. Its memory is bounded by limit, not by the text: a prompt
// of many megabytes for a context of a few thousand tokens costs little.
func (t *Tokenizer) EncodeWithSpecialsUpTo(text string, limit int) ([]int, bool) {
	out := t.encodeUpTo(text, true, max(0, limit))
	if out == nil {
		return nil, false
	}
	return out, true
}

// MinTokens is a lower bound on the token count of text, from its length
// alone: no token holds more bytes than the vocabulary's longest, and NFC
// shortens text by at most 3 to 1 (Hangul jamo into a syllable). It reads
// the text once without allocating, to refuse a text too long for a
// context before rendering or encoding it.
func (t *Tokenizer) MinTokens(text string) int {
	n := len(text)
	if t.nfc && !norm.NFC.IsNormalString(text) {
		n /= 3
	}
	return t.minTokens(n)
}

// minTokens is the lower bound for n bytes of normalised text.
func (t *Tokenizer) minTokens(n int) int {
	if t.maxPiece == 0 {
		return 0
	}
	return (n + t.maxPiece - 1) / t.maxPiece
}

// noLimit is encode's limit when there is none.
const noLimit = int(^uint(0) >> 1)

func (t *Tokenizer) encode(text string, withSpecial bool) []int {
	return t.encodeUpTo(text, withSpecial, noLimit)
}

// encodeUpTo encodes text, or returns nil as soon as it is known to hold
// more than limit tokens.
func (t *Tokenizer) encodeUpTo(text string, withSpecial bool, limit int) []int {
	if !utf8.ValidString(text) {
		b, _ := appendLossyUTF8(nil, []byte(text), true)
		text = string(b)
	}
	out := make([]int, 0, min(len(text)/3, limit)+1)
	ends := make([]int, 0, 64)
	m := t.matchers[boolIndex(withSpecial)]
	pos := 0
	for {
		start, end, id := m.find(text, pos)
		if start < 0 {
			break
		}
		out, ends = t.encodeSegment(text[pos:start], withSpecial, out, ends, limit)
		if out == nil || len(out) >= limit {
			return nil
		}
		out = append(out, id)
		pos = end
	}
	out, _ = t.encodeSegment(text[pos:], withSpecial, out, ends, limit)
	return out
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// encodeSegment handles text between raw-matched added tokens: normalise,
// look for added tokens that match normalised text, then split and merge.
// A nil out from encodeSegment and encodePlain means that the text passed
// the limit.
func (t *Tokenizer) encodeSegment(seg string, withSpecial bool, out, ends []int, limit int) ([]int, []int) {
	if seg == "" {
		return out, ends
	}
	if limit != noLimit && len(out)+t.MinTokens(seg) > limit {
		return nil, ends
	}
	if t.nfc {
		seg = norm.NFC.String(seg)
	}
	m := t.matchers[2+boolIndex(withSpecial)]
	pos := 0
	for {
		start, end, id := m.find(seg, pos)
		if start < 0 {
			break
		}
		out, ends = t.encodePlain(seg[pos:start], out, ends, limit)
		if out == nil || len(out) >= limit {
			return nil, ends
		}
		out = append(out, id)
		pos = end
	}
	return t.encodePlain(seg[pos:], out, ends, limit)
}

// plainWindow is how much text encodePlain pre-tokenizes at a time when
// it has a limit, so that the piece offsets of a long text are not all
// held at once.
const plainWindow = 64 << 10

// encodePlain pre-tokenizes normalised text and merges each piece.
func (t *Tokenizer) encodePlain(s string, out, ends []int, limit int) ([]int, []int) {
	if s == "" {
		return out, ends
	}
	if limit != noLimit {
		if len(out)+t.minTokens(len(s)) > limit {
			return nil, ends
		}
		if q, ok := t.splitter.(*qwenScanner); ok && len(s) > plainWindow {
			// Piece by piece, stopping at the limit.
			for i := 0; i < len(s); {
				end := q.next(s, i)
				if out = t.encodePiece(s[i:end], out); len(out) > limit {
					return nil, ends
				}
				if len(out)+t.minTokens(len(s)-end) > limit {
					return nil, ends
				}
				i = end
			}
			return out, ends
		}
	}
	ends = t.splitter.split(s, ends[:0])
	start := 0
	for _, end := range ends {
		piece := s[start:end]
		start = end
		if limit != noLimit && len(out)+t.minTokens(len(piece)) > limit {
			return nil, ends
		}
		out = t.encodePiece(piece, out)
	}
	if len(out) > limit {
		return nil, ends
	}
	return out, ends
}

// encodePiece merges one pre-token.
func (t *Tokenizer) encodePiece(piece string, out []int) []int {
	if t.ignoreMerges {
		if id, ok := t.vocab[bytesToByteLevel([]byte(piece))]; ok {
			return append(out, id)
		}
	}
	return t.bpe.encodeWord(piece, out)
}

// Decode returns the text of ids, special tokens included. Bytes that do not
// form valid UTF-8 (a character cut off at the end, say) become U+FFFD, as
// in Hugging Face's decode. Ids outside the vocabulary are skipped.
func (t *Tokenizer) Decode(ids []int) string {
	buf := make([]byte, 0, len(ids)*4)
	for _, id := range ids {
		if id >= 0 && id < len(t.pieces) {
			buf = append(buf, t.pieces[id]...)
		}
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	out, _ := appendLossyUTF8(make([]byte, 0, len(buf)+8), buf, true)
	return string(out)
}

// TokenBytes returns the raw bytes id stands for (possibly part of a
// character), or nil for an id outside the vocabulary.
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= len(t.pieces) {
		return nil
	}
	return t.pieces[id]
}

// IsSpecial reports whether id is a special added token such as
// `<|im_end|>` (`<think>` and `<tool_call>` are added but not special).
func (t *Tokenizer) IsSpecial(id int) bool {
	return t.special[id]
}

// TokenID returns the id of a token given as text: an added token's content
// (`<|im_end|>`) or a vocabulary entry spelled in raw text (" the").
func (t *Tokenizer) TokenID(s string) (int, bool) {
	if a, ok := t.added[s]; ok {
		return a.id, true
	}
	id, ok := t.vocab[bytesToByteLevel([]byte(s))]
	return id, ok
}

// VocabSize is one more than the largest id, added tokens included.
func (t *Tokenizer) VocabSize() int {
	return len(t.pieces)
}

// StreamDecoder turns ids into text one at a time for streaming. It holds
// back the bytes of a character that is not complete yet, so it never emits
// half a character, and the concatenation of everything it returns (Flush
// included) equals Decode of all the ids it was given.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder returns a decoder with nothing pending.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t, pending: make([]byte, 0, 8)}
}

// Add appends the token id and returns the text that became complete,
// possibly "".
func (d *StreamDecoder) Add(id int) string {
	if id < 0 || id >= len(d.t.pieces) {
		return ""
	}
	d.pending = append(d.pending, d.t.pieces[id]...)
	out, used := appendLossyUTF8(nil, d.pending, false)
	d.pending = append(d.pending[:0], d.pending[used:]...)
	return string(out)
}

// Flush returns whatever is held back, with an unfinished character shown
// as U+FFFD, and resets the decoder.
func (d *StreamDecoder) Flush() string {
	out, _ := appendLossyUTF8(nil, d.pending, true)
	d.pending = d.pending[:0]
	return string(out)
}

// Pending reports whether bytes of an unfinished character are held back.
func (d *StreamDecoder) Pending() bool {
	return len(d.pending) > 0
}
