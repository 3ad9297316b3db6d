package docs

import (
	"bufio"
	"io"

	"github.com/ledongthuc/pdf"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
)

// The PDF library interprets a page's content streams whole: it keeps every
// character the page shows (some 64 bytes each) and every operand until its
// operator, and holds each token at once. A content stream is compressed,
// so a small file can make one page show hundreds of millions of
// characters, or push as many numbers without an operator. scanPage reads
// the page's content once, streamed and in constant memory, and refuses
// such a page before the library reads it.
const (
	// maxPageText bounds the bytes of the strings a page shows, an upper
	// bound of its characters: 512 KB is fifty times the densest printed
	// page (about 10,000 characters).
	maxPageText = 512 << 10
	// maxPageOperands bounds the operands before one operator; real
	// operators take at most a few, a TJ array some hundreds.
	maxPageOperands = 1 << 16
	// maxPDFToken bounds one name, number or keyword.
	maxPDFToken = 1 << 20
)

// scanPage checks page n's content streams against the bounds above.
func (x *extraction) scanPage(page pdf.Value, n int) (err error) {
	defer recoverAs(&err)
	contents := page.Key("Contents")
	var streams []pdf.Value
	switch contents.Kind() {
	case pdf.Stream:
		streams = append(streams, contents)
	case pdf.Array:
		for i := 0; i < contents.Len(); i++ {
			streams = append(streams, contents.Index(i))
		}
	}
	s := &contentScanner{x: x, page: n}
	for _, v := range streams {
		if v.Kind() != pdf.Stream {
			continue
		}
		rc := v.Reader()
		err := s.scan(bufio.NewReaderSize(rc, 64<<10))
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// contentScanner is a small lexer of PDF content (ISO 32000 7.2): it tells
// strings, hex strings, names, numbers and operators apart and skips
// comments, counting what the library would keep. It reads inline image
// data as tokens too, as the library does (which loses a page's text
// after an image whose data holds a parenthesis, but must not be handed
// what the scan skipped).
type contentScanner struct {
	x        *extraction
	page     int
	text     int // string bytes so far on the page
	operands int // since the last operator
}

func isPDFSpace(c byte) bool {
	return c == 0 || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' '
}

func isPDFDelimiter(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

func (s *contentScanner) scan(r *bufio.Reader) error {
	for {
		if err := s.x.check(); err != nil {
			return err
		}
		c, err := r.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case isPDFSpace(c), c == '[', c == ']', c == '{', c == '}', c == ')', c == '>':
		case c == '%': // a comment, to the end of the line
			for {
				_, err := r.ReadSlice('\n')
				if err != bufio.ErrBufferFull {
					break
				}
			}
		case c == '(':
			if err := s.literal(r); err != nil {
				return err
			}
		case c == '<':
			if next, err := r.Peek(1); err == nil && next[0] == '<' {
				r.ReadByte() // a dictionary
				continue
			}
			if err := s.hex(r); err != nil {
				return err
			}
		default:
			word, err := s.token(r, c)
			if err != nil {
				return err
			}
			if err := s.word(c, word); err != nil {
				return err
			}
		}
	}
}

// operand counts one operand.
func (s *contentScanner) operand() error {
	if s.operands++; s.operands > maxPageOperands {
		return failure(s.x.name, ErrDamaged, "is not a readable PDF document (page %d gives an operator more than %s values; no real PDF does); open it in the program that made it, save a new copy and attach that", s.page, thousands(maxPageOperands))
	}
	return nil
}

// shown counts n bytes of string.
func (s *contentScanner) shown(n int) error {
	if s.text += n; s.text > maxPageText {
		return failure(s.x.name, ErrTextLimit, "has more than %s of text on page %d, far more than any printed page; it may be made to fill memory, and was not read", bytesize.Format(maxPageText), s.page)
	}
	return nil
}

// literal reads a (string) after its opening parenthesis.
func (s *contentScanner) literal(r *bufio.Reader) error {
	if err := s.operand(); err != nil {
		return err
	}
	for depth := 1; depth > 0; {
		c, err := r.ReadByte()
		if err != nil {
			return nil // unterminated at the end of the stream: the library's to report
		}
		switch c {
		case '\\':
			r.ReadByte()
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				continue
			}
		}
		if err := s.shown(1); err != nil {
			return err
		}
	}
	return nil
}

// hex reads a <hex string> after its opening bracket.
func (s *contentScanner) hex(r *bufio.Reader) error {
	if err := s.operand(); err != nil {
		return err
	}
	digits := 0
	for {
		c, err := r.ReadByte()
		if err != nil || c == '>' {
			return nil
		}
		if !isPDFSpace(c) {
			if digits++; digits%2 == 0 {
				if err := s.shown(1); err != nil {
					return err
				}
			}
		}
	}
}

// token reads the rest of a name, number or keyword that starts with c,
// returning its first bytes (enough to tell keywords apart).
func (s *contentScanner) token(r *bufio.Reader, c byte) ([]byte, error) {
	word := []byte{c}
	for n := 1; ; n++ {
		if n > maxPDFToken {
			return nil, failure(s.x.name, ErrDamaged, "is not a readable PDF document (page %d holds a value of more than %s; no real PDF does); open it in the program that made it, save a new copy and attach that", s.page, bytesize.Format(maxPDFToken))
		}
		next, err := r.Peek(1)
		if err != nil || isPDFSpace(next[0]) || isPDFDelimiter(next[0]) {
			return word, nil
		}
		r.ReadByte()
		if len(word) < 8 {
			word = append(word, next[0])
		}
	}
}

// word handles a name, number or keyword: an operator ends its operands.
func (s *contentScanner) word(c byte, word []byte) error {
	switch w := string(word); {
	case c == '/', c >= '0' && c <= '9', c == '+', c == '-', c == '.', w == "true", w == "false", w == "null":
		return s.operand()
	default:
		s.operands = 0
		return nil
	}
}
