package docs

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// rtf reads a Rich Text Format document: its text with paragraphs, tabs
// and tables (as Markdown tables), Unicode (\uN) and code-page characters
// (\'hh, in the code page of the document or of the current font's
// charset, so that Japanese and Chinese RTF written by older Word reads
// right). Font and colour tables, stylesheets, document information,
// pictures, embedded objects, field instructions, headers and footers are
// left out.
//
// No maintained Go RTF library exists; this is a small tokenizer of the
// RTF 1.9 syntax. It keeps one state per open group on a slice, so deep
// nesting costs memory in proportion to the input, never stack.
func (x *extraction) rtf() (string, error) {
	const what = "RTF document"
	data := x.data
	if !bytes.HasPrefix(data, []byte(`{\rtf`)) {
		return "", damaged(x.name, what, fmt.Errorf(`it does not start with {\rtf`))
	}
	p := &rtfParser{
		x:            x,
		codePage:     1252,
		fontCharsets: map[int]int{},
		stack:        []rtfState{{unicodeSkip: 1, font: -1}},
	}
	if err := p.parse(data); err != nil {
		return "", err
	}
	if p.depth() > 0 {
		return "", damaged(x.name, what, fmt.Errorf("it ends inside %d unclosed groups; it may have been cut short", p.depth()))
	}
	return p.finish(), nil
}

// rtfState is the state one group carries; a group starts with a copy of
// its parent's.
type rtfState struct {
	skip        bool // inside a destination whose text is not document text
	fontTable   bool
	unicodeSkip int // \ucN: fallback characters that follow each \uN
	font        int
	inTable     bool
}

type rtfParser struct {
	x            *extraction
	stack        []rtfState
	codePage     int
	defaultFont  int
	fontCharsets map[int]int // font number → \fcharset
	fontDef      int         // the font the font table is describing
	pending      []byte      // code-page bytes not yet decoded
	pendingPage  int
	skipChars    int  // fallback characters still to skip after \uN
	highSurr     rune // a UTF-16 high surrogate waiting for its pair
	out          strings.Builder
	cell         strings.Builder
	row          []string
	rows         [][]string
}

func (p *rtfParser) depth() int { return len(p.stack) - 1 }

func (p *rtfParser) state() *rtfState { return &p.stack[len(p.stack)-1] }

// Destinations whose content is not document text.
var rtfSkipped = map[string]bool{
	"colortbl": true, "stylesheet": true, "info": true, "pict": true, "objdata": true,
	"header": true, "headerl": true, "headerr": true, "headerf": true, "footer": true,
	"footerl": true, "footerr": true, "footerf": true, "fldinst": true, "themedata": true,
	"colorschememapping": true, "datastore": true, "latentstyles": true, "listtable": true,
	"listoverridetable": true, "rsidtbl": true, "generator": true, "xmlnstbl": true,
	"mmathPr": true, "filetbl": true, "revtbl": true, "bkmkstart": true, "bkmkend": true,
	"nonshppict": true, "shppict": true, "pntxta": true, "pntxtb": true, "userprops": true,
	"docvar": true, "template": true, "pgdsctbl": true, "wgrffmtfilter": true, "fchars": true,
	"lchars": true, "protusertbl": true, "ftnsep": true, "ftnsepc": true, "aftnsep": true,
	"sp": true, "picprop": true, "blipuid": true, "passwordhash": true, "xe": true, "tc": true,
}

// Control words that stand for a character.
var rtfCharacters = map[string]string{
	"emdash": "—", "endash": "–", "bullet": "•", "lquote": "‘", "rquote": "’",
	"ldblquote": "“", "rdblquote": "”", "tab": "\t", "emspace": " ", "enspace": " ",
	"qmspace": " ", "zwj": "\u200d", "zwnj": "\u200c",
}

// maxRTFDepth bounds the nesting of groups: each open group keeps a state
// of some 40 bytes, so that 100 MB of "{" would take gigabytes. Word
// nests a few tens deep.
const maxRTFDepth = 10000

func (p *rtfParser) parse(data []byte) error {
	for i := 0; i < len(data); {
		if i&0xffff == 0 {
			if err := p.x.check(); err != nil {
				return err
			}
		}
		c := data[i]
		switch c {
		case '{':
			p.flushBytes()
			p.skipChars = 0
			if p.depth() >= maxRTFDepth {
				return damaged(p.x.name, "RTF document", fmt.Errorf("it nests groups more than %s deep; no real document does", thousands(maxRTFDepth)))
			}
			p.stack = append(p.stack, *p.state())
			i++
			if bytes.HasPrefix(data[i:], []byte(`\*`)) {
				// An ignorable destination: its text is never document
				// text for a reader that does not know it.
				p.state().skip = true
				i += 2
			}
		case '}':
			p.flushBytes()
			p.skipChars = 0
			if len(p.stack) > 1 {
				p.stack = p.stack[:len(p.stack)-1]
			}
			i++
		case '\\':
			n, err := p.control(data, i)
			if err != nil {
				return err
			}
			i += n
		case '\r', '\n':
			i++
		default:
			if p.skipChars > 0 {
				p.skipChars--
			} else if !p.state().skip && !p.state().fontTable {
				p.addByte(c)
			}
			i++
		}
	}
	p.flushBytes()
	return nil
}

// control handles the control word or symbol at data[i] and returns its
// length.
func (p *rtfParser) control(data []byte, i int) (int, error) {
	if i+1 >= len(data) {
		return 1, nil
	}
	c := data[i+1]
	st := p.state()
	if !isASCIILetter(c) {
		switch c {
		case '\'':
			if i+4 <= len(data) {
				v, err := strconv.ParseUint(string(data[i+2:i+4]), 16, 8)
				if err == nil {
					if p.skipChars > 0 {
						p.skipChars--
					} else if !st.skip && !st.fontTable {
						p.addByte(byte(v))
					}
				}
			}
			return min(4, len(data)-i), nil
		case '\\', '{', '}':
			if !st.skip && !st.fontTable && p.skipChars == 0 {
				p.addByte(c)
			} else if p.skipChars > 0 {
				p.skipChars--
			}
		case '~':
			p.text("\u00a0")
		case '_':
			p.text("-")
		case '\n', '\r':
			p.paragraph()
		}
		return 2, nil
	}
	// A control word: letters, an optional signed number, an optional
	// space that belongs to it.
	j := i + 1
	for j < len(data) && isASCIILetter(data[j]) && j-i <= 32 {
		j++
	}
	word := string(data[i+1 : j])
	k := j
	if k < len(data) && data[k] == '-' {
		k++
	}
	for k < len(data) && data[k] >= '0' && data[k] <= '9' && k-j < 11 {
		k++
	}
	param, hasParam := 0, k > j && !(k == j+1 && data[j] == '-')
	if hasParam {
		param, _ = strconv.Atoi(string(data[j:k]))
	} else {
		k = j
	}
	end := k
	if end < len(data) && data[end] == ' ' {
		end++
	}
	if word == "bin" {
		// Binary data follows: skip it without reading it as text.
		return min(end-i+max(param, 0), len(data)-i), nil
	}
	p.word(word, param, hasParam)
	return end - i, nil
}

func (p *rtfParser) word(word string, param int, hasParam bool) {
	st := p.state()
	if st.fontTable {
		switch word {
		case "f":
			p.fontDef = param
		case "fcharset":
			p.fontCharsets[p.fontDef] = param
		}
		return
	}
	switch word {
	case "fonttbl":
		st.fontTable = true
		return
	case "ansicpg":
		p.codePage = param
		return
	case "deff":
		p.defaultFont = param
		return
	case "uc":
		st.unicodeSkip = max(param, 0)
		return
	case "f":
		p.flushBytes()
		st.font = param
		return
	}
	if rtfSkipped[word] {
		st.skip = true
		return
	}
	if st.skip {
		return
	}
	switch word {
	case "u":
		p.flushBytes()
		r := rune(int16(param)) // \uN is a signed 16-bit value
		if param > 32767 {
			r = rune(param)
		}
		if r < 0 {
			r += 65536
		}
		p.unicode(r)
		p.skipChars = st.unicodeSkip
	case "par", "sect", "page":
		p.paragraph()
	case "line":
		p.text("\n")
	case "pard":
		st.inTable = false
	case "intbl":
		st.inTable = true
	case "cell", "nestcell":
		p.flushBytes()
		p.row = append(p.row, p.cell.String())
		p.cell.Reset()
	case "row", "nestrow":
		p.flushBytes()
		if p.cell.Len() > 0 {
			p.row = append(p.row, p.cell.String())
			p.cell.Reset()
		}
		if p.row != nil {
			p.rows = append(p.rows, p.row)
			p.row = nil
		}
	default:
		if s, ok := rtfCharacters[word]; ok {
			p.text(s)
		}
	}
}

func (p *rtfParser) unicode(r rune) {
	if utf16.IsSurrogate(r) {
		if r < 0xDC00 {
			p.highSurr = r
			return
		}
		if p.highSurr != 0 {
			r = utf16.DecodeRune(p.highSurr, r)
		}
	}
	p.highSurr = 0
	p.text(string(r))
}

// addByte queues a byte of text in the current code page.
func (p *rtfParser) addByte(b byte) {
	page := p.currentCodePage()
	if page != p.pendingPage {
		p.flushBytes()
		p.pendingPage = page
	}
	p.pending = append(p.pending, b)
}

func (p *rtfParser) currentCodePage() int {
	font := p.state().font
	if font < 0 {
		font = p.defaultFont
	}
	if cs, ok := p.fontCharsets[font]; ok {
		if page := charsetCodePage(cs); page != 0 {
			return page
		}
	}
	return p.codePage
}

func (p *rtfParser) flushBytes() {
	if len(p.pending) == 0 {
		return
	}
	enc := codePageEncoding(p.pendingPage)
	var s string
	if enc == nil {
		s = strings.ToValidUTF8(string(p.pending), "\ufffd")
	} else if out, err := enc.NewDecoder().Bytes(p.pending); err == nil {
		s = string(out)
	} else {
		s = strings.ToValidUTF8(string(p.pending), "\ufffd")
	}
	p.pending = p.pending[:0]
	p.write(s)
}

// text writes decoded text, after any queued code-page bytes.
func (p *rtfParser) text(s string) {
	if p.state().skip || p.state().fontTable {
		return
	}
	p.flushBytes()
	p.write(s)
}

func (p *rtfParser) write(s string) {
	if p.state().inTable {
		p.cell.WriteString(s)
		return
	}
	if strings.TrimSpace(s) != "" {
		p.flushTable()
	}
	p.out.WriteString(s)
}

func (p *rtfParser) paragraph() {
	if p.state().skip {
		return
	}
	p.flushBytes()
	if p.state().inTable {
		p.cell.WriteString("\n")
		return
	}
	p.out.WriteString("\n")
}

// flushTable writes the rows collected so far as a Markdown table.
func (p *rtfParser) flushTable() {
	if p.cell.Len() > 0 || p.row != nil {
		p.word("row", 0, false)
	}
	if len(p.rows) == 0 {
		return
	}
	table := markdownTable(p.rows)
	p.rows = nil
	p.out.WriteString("\n\n" + table + "\n\n")
}

func (p *rtfParser) finish() string {
	p.flushBytes()
	p.flushTable()
	lines := strings.Split(p.out.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	text := strings.Join(lines, "\n")
	for strings.Contains(text, "\n\n\n") {
		text = strings.ReplaceAll(text, "\n\n\n", "\n\n")
	}
	return strings.TrimSpace(text)
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// charsetCodePage maps an RTF \fcharset to its Windows code page; 0 for
// the document's own code page.
func charsetCodePage(charset int) int {
	switch charset {
	case 77:
		return 10000
	case 128:
		return 932
	case 129:
		return 949
	case 134:
		return 936
	case 136:
		return 950
	case 161:
		return 1253
	case 162:
		return 1254
	case 163:
		return 1258
	case 177:
		return 1255
	case 178:
		return 1256
	case 186:
		return 1257
	case 204:
		return 1251
	case 222:
		return 874
	case 238:
		return 1250
	case 254:
		return 437
	case 255:
		return 850
	}
	return 0
}

// codePageEncoding returns the decoder of a Windows code page; nil for
// UTF-8 or a page x/text does not know (bytes then pass as they are).
func codePageEncoding(page int) encoding.Encoding {
	switch page {
	case 932:
		return japanese.ShiftJIS
	case 936:
		return simplifiedchinese.GBK
	case 949:
		return korean.EUCKR
	case 950:
		return traditionalchinese.Big5
	case 10000:
		return charmap.Macintosh
	case 437:
		return charmap.CodePage437
	case 850:
		return charmap.CodePage850
	case 65001:
		return nil
	}
	if enc, err := htmlindex.Get("windows-" + strconv.Itoa(page)); err == nil {
		return enc
	}
	return charmap.Windows1252
}
