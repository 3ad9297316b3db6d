package docs

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"
)

// Tokenizer is the part of the model's tokenizer that counting and cutting
// need; *tokenizer.Tokenizer (engine/tokenizer) has it.
type Tokenizer interface {
	Encode(text string) []int
	TokenBytes(id int) []byte
}

// Attachment is a document attached to a conversation: the record a
// conversation stores (as JSON) so that it still has the document when it
// is reopened, and what UserMessage places in the prompt.
type Attachment struct {
	// Name, Size and SHA256 identify the original file.
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Format Format `json:"format"`
	Type   string `json:"type"`
	// Pages counts PageUnit ("pages", "sheets", "chapters"); 0 when the
	// format has none.
	Pages    int    `json:"pages,omitempty"`
	PageUnit string `json:"page_unit,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	// Text is what the model reads, and Tokens its length in the model's
	// tokens.
	Text   string   `json:"text"`
	Tokens int      `json:"tokens"`
	Notes  []string `json:"notes,omitempty"`
	// Cut is set when Fit shortened Text to fit the context.
	Cut *Cut `json:"cut,omitempty"`
}

// Cut records how an attachment was shortened.
type Cut struct {
	Keep           Keep `json:"keep"`
	OriginalTokens int  `json:"original_tokens"`
	// KeptTokens counts the document's own tokens that were kept; Tokens
	// of the attachment adds the note that marks the cut.
	KeptTokens int `json:"kept_tokens"`
}

// Keep says which part of a document that does not fit is kept.
type Keep string

// The two ways to shorten a document.
const (
	KeepBeginning Keep = "beginning"
	KeepEnd       Keep = "end"
)

// NewAttachment counts doc's tokens with the model's tokenizer. Counting
// a large document takes a while (about 25 MB of text a second on one
// core of a shared 2-core machine, BenchmarkCountTokens: two seconds for
// a 50 MB file), so it stops when ctx ends and reports progress, in bytes
// of text, when progress is not nil. A text over the MaxTokens limit it
// was extracted under (DefaultMaxTokens for a Document made otherwise) is
// refused with ErrTextLimit as soon as the count passes it.
func NewAttachment(ctx context.Context, doc *Document, tok Tokenizer, progress func(done, total int64)) (Attachment, error) {
	limit := doc.maxTokens
	if limit == 0 {
		limit = DefaultMaxTokens
	}
	n, err := countTokens(ctx, tok, doc.Text, limit, progress)
	if errors.Is(err, errTokenLimit) {
		return Attachment{}, failure(doc.Name, ErrTextLimit, "has more than %s tokens of text, the limit for one document (far more than the model can read at once); attach the part you need", thousands(limit))
	}
	if err != nil {
		return Attachment{}, &Error{Name: doc.Name, Kind: err, Message: "counting tokens cancelled"}
	}
	return Attachment{
		Name: doc.Name, Size: doc.Size, SHA256: doc.SHA256, Format: doc.Format, Type: doc.Type,
		Pages: doc.Pages, PageUnit: doc.PageUnit, Encoding: doc.Encoding,
		Text: doc.Text, Tokens: n, Notes: doc.Notes,
	}, nil
}

// countChunk is how much text CountTokens encodes between two checks of
// the context.
const countChunk = 256 << 10

// CountTokens returns len(tok.Encode(text)), encoding the text a piece at
// a time so that it can stop and report progress. The pieces end at a line
// break followed by an ASCII letter or digit: every alternative of the Qwen
// pre-tokenizer's pattern that can hold a line break ends at the last one
// of a run and none can go on into a letter, normalization never joins
// across a line break, and no added token holds one; so the sum over the
// pieces equals the count of the whole (TestCountTokensChunked checks it).
func CountTokens(ctx context.Context, tok Tokenizer, text string, progress func(done, total int64)) (int, error) {
	return countTokens(ctx, tok, text, -1, progress)
}

// errTokenLimit is countTokens' error once the count passes its limit.
var errTokenLimit = errors.New("token limit")

// countTokens is CountTokens that stops with errTokenLimit as soon as the
// count passes limit (none when negative).
func countTokens(ctx context.Context, tok Tokenizer, text string, limit int, progress func(done, total int64)) (int, error) {
	total := 0
	for done := 0; done < len(text); {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		end := chunkEnd(text, done, countChunk)
		total += len(tok.Encode(text[done:end]))
		if limit >= 0 && total > limit {
			return total, errTokenLimit
		}
		done = end
		if progress != nil {
			progress(int64(done), int64(len(text)))
		}
	}
	return total, nil
}

// chunkEnd finds where a piece that starts at from and is about size bytes
// long may end; the end of the text when there is no such place.
func chunkEnd(text string, from, size int) int {
	if len(text)-from <= size {
		return len(text)
	}
	for i := from + size; i < len(text)-1; i++ {
		if text[i] == '\n' && isASCIIWordByte(text[i+1]) {
			return i + 1
		}
		if i-from > 16*size {
			break // no such place for a long stretch: encode the rest whole
		}
	}
	return len(text)
}

func isASCIIWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// cutText keeps n of the tokens of text from its beginning or its end,
// ending (or starting) at a whole character.
func cutText(tok Tokenizer, ids []int, n int, keep Keep) string {
	n = min(max(n, 0), len(ids))
	var b []byte
	if keep == KeepEnd {
		for _, id := range ids[len(ids)-n:] {
			b = append(b, tok.TokenBytes(id)...)
		}
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
		return strings.TrimLeft(string(b), " \t\n")
	}
	for _, id := range ids[:n] {
		b = append(b, tok.TokenBytes(id)...)
	}
	for len(b) > 0 {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size > 1 {
			break
		}
		b = b[:len(b)-1] // part of a character whose other bytes were cut
	}
	return strings.TrimRight(string(b), " \t\n")
}
