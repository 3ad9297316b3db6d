package tokenizer

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The vocabulary and merges are most of tokenizer.json (5 MB for Qwen3,
// 8 MB for Qwen3.6). Decoding them with encoding/json's reflection took
// most of Load's time; this scanner reads just their two shapes directly.

// jsonScanner reads JSON values from data, skipping white space.
type jsonScanner struct {
	data []byte
	pos  int
	buf  []byte // scratch for strings with escapes
}

func (s *jsonScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", s.pos, fmt.Sprintf(format, args...))
}

// expect consumes the byte c after optional white space.
func (s *jsonScanner) expect(c byte) error {
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != c {
		return s.errorf("expected %q", c)
	}
	s.pos++
	return nil
}

// peek returns the next byte after white space, or 0 at the end.
func (s *jsonScanner) peek() byte {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// str reads a JSON string.
func (s *jsonScanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.pos
	// Fast path: no escapes.
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if c == '"' {
			out := string(s.data[start:s.pos])
			s.pos++
			return out, nil
		}
		if c == '\\' {
			break
		}
		s.pos++
	}
	s.buf = append(s.buf[:0], s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return string(s.buf), nil
		case c != '\\':
			s.buf = append(s.buf, c)
			s.pos++
			continue
		}
		if s.pos+1 >= len(s.data) {
			break
		}
		e := s.data[s.pos+1]
		s.pos += 2
		switch e {
		case '"', '\\', '/':
			s.buf = append(s.buf, e)
		case 'b':
			s.buf = append(s.buf, '\b')
		case 'f':
			s.buf = append(s.buf, '\f')
		case 'n':
			s.buf = append(s.buf, '\n')
		case 'r':
			s.buf = append(s.buf, '\r')
		case 't':
			s.buf = append(s.buf, '\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				// A pair is two escapes; a lone half becomes U+FFFD, as
				// encoding/json does.
				r2 := rune(-1)
				if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
					save := s.pos
					s.pos += 2
					if r2, err = s.hex4(); err != nil {
						return "", err
					}
					if utf16.DecodeRune(r, r2) == utf8.RuneError {
						s.pos, r2 = save, -1
					}
				}
				if r2 >= 0 {
					r = utf16.DecodeRune(r, r2)
				} else {
					r = utf8.RuneError
				}
			}
			s.buf = utf8.AppendRune(s.buf, r)
		default:
			return "", s.errorf("invalid escape \\%c", e)
		}
	}
	return "", errors.New("unterminated string")
}

func (s *jsonScanner) hex4() (rune, error) {
	if s.pos+4 > len(s.data) {
		return 0, s.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(s.data[s.pos:s.pos+4]), 16, 32)
	if err != nil {
		return 0, s.errorf("bad \\u escape")
	}
	s.pos += 4
	return rune(v), nil
}

// integer reads a non-negative JSON integer.
func (s *jsonScanner) integer() (int, error) {
	s.skipSpace()
	start := s.pos
	n := 0
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		n = n*10 + int(s.data[s.pos]-'0')
		s.pos++
		if n > 1<<31 {
			return 0, s.errorf("number too large")
		}
	}
	if s.pos == start {
		return 0, s.errorf("expected a token id")
	}
	return n, nil
}

// parseVocab reads {"token": id, …}.
func parseVocab(raw []byte) (map[string]int, error) {
	s := &jsonScanner{data: raw}
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	vocab := make(map[string]int, len(raw)/16)
	if s.peek() == '}' {
		s.pos++
		return vocab, nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return nil, err
		}
		if err := s.expect(':'); err != nil {
			return nil, err
		}
		id, err := s.integer()
		if err != nil {
			return nil, err
		}
		vocab[key] = id
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return vocab, nil
		default:
			return nil, s.errorf("expected , or }")
		}
	}
}

// parseMerges reads both forms tokenizer.json uses: [["a", "b"], …]
// (newer, which allows spaces inside tokens) and ["a b", …] (older).
func parseMerges(raw []byte) ([][2]string, error) {
	s := &jsonScanner{data: raw}
	if s.peek() == 'n' { // null
		return nil, nil
	}
	if err := s.expect('['); err != nil {
		return nil, err
	}
	merges := make([][2]string, 0, len(raw)/20)
	if s.peek() == ']' {
		s.pos++
		return merges, nil
	}
	for {
		var pair [2]string
		if s.peek() == '[' {
			s.pos++
			a, err := s.str()
			if err != nil {
				return nil, err
			}
			if err := s.expect(','); err != nil {
				return nil, err
			}
			b, err := s.str()
			if err != nil {
				return nil, err
			}
			if err := s.expect(']'); err != nil {
				return nil, err
			}
			pair = [2]string{a, b}
		} else {
			line, err := s.str()
			if err != nil {
				return nil, err
			}
			a, b, ok := cutSpace(line)
			if !ok {
				return nil, fmt.Errorf("merge %d %q is not two tokens separated by a space", len(merges), line)
			}
			pair = [2]string{a, b}
		}
		merges = append(merges, pair)
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return merges, nil
		default:
			return nil, s.errorf("expected , or ]")
		}
	}
}

func cutSpace(line string) (string, string, bool) {
	for i := 0; i < len(line); i++ {
		if line[i] == ' ' {
			return line[:i], line[i+1:], true
		}
	}
	return "", "", false
}
