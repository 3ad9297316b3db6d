package docs

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
)

// html reads an HTML page: its encoding from a byte order mark or a
// <meta charset>, else detected; then its readable text (htmlText).
func (x *extraction) html() (string, string, error) {
	enc, name, ok := bomEncoding(x.data)
	if !ok {
		var certain bool
		enc, name, certain = charset.DetermineEncoding(x.data[:min(len(x.data), 1024)], "text/html")
		if certain {
			name = canonicalName(name)
		} else {
			enc, name = detectEncoding(x.data)
		}
	}
	text, name, err := x.decodeWith(x.data, enc, name)
	if err != nil {
		return "", "", err
	}
	out, err := x.htmlText(strings.NewReader(text), false)
	return out, name, err
}

// Elements whose content is not text for a reader: code, styles, embedded
// objects and the page's title bar. Only elements that have an end tag are
// listed, since skipping counts start and end tags.
var skippedElements = map[string]bool{
	"script": true, "style": true, "noscript": true, "template": true, "title": true,
	"svg": true, "math": true, "canvas": true, "iframe": true, "object": true,
	"select": true,
}

// Elements that start a new paragraph (a blank line) or a new line.
var paragraphElements = map[string]bool{
	"p": true, "pre": true, "blockquote": true, "table": true, "ul": true, "ol": true,
	"dl": true, "hr": true, "figure": true, "h1": true, "h2": true, "h3": true, "h4": true,
	"h5": true, "h6": true,
}

var lineElements = map[string]bool{
	"div": true, "li": true, "tr": true, "br": true, "dt": true, "dd": true, "section": true,
	"article": true, "header": true, "footer": true, "nav": true, "main": true, "aside": true,
	"address": true, "caption": true, "figcaption": true, "summary": true, "details": true,
	"form": true, "fieldset": true, "legend": true, "body": true, "option": true,
}

// maxIndent bounds the indentation of nested lists, so that a page of a
// million nested lists costs linear, not quadratic, output.
const maxIndent = 8

// htmlText writes the readable text of an HTML document: headings as
// Markdown headings, lists as Markdown lists, tables as Markdown tables,
// preformatted text fenced, scripts and styles dropped, links kept as
// their text (never followed). It streams tokens through the x/net/html
// tokenizer rather than building a tree, so that nesting depth costs
// nothing. Its text counts against MaxChars as it is read.
//
// A part streamed from a ZIP container (an EPUB chapter, bounded only by
// its unpacked size) is read with the tokenizer's buffer bounded by
// maxRun: the tokenizer holds one whole token, and no real chapter has a
// text or a tag that long. A page given whole is in memory already.
func (x *extraction) htmlText(r io.Reader, streamed bool) (string, error) {
	z := html.NewTokenizer(r)
	if streamed {
		z.SetMaxBuf(maxRun)
	}
	h := &htmlWriter{}
	for i := 0; ; i++ {
		if i%4096 == 0 {
			if err := x.check(); err != nil {
				return "", err
			}
		}
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			err := z.Err()
			var known *Error
			switch {
			case err == io.EOF:
				return h.finish(), nil
			case errors.As(err, &known):
				return "", err // a limit, from the part's reader
			case errors.Is(err, html.ErrBufferExceeded):
				return "", failure(x.name, ErrTextLimit, "has a single piece of text or markup longer than %s; no real document does, and it was not read", bytesize.Format(maxRun))
			}
			return "", damaged(x.name, "HTML page", err)
		case html.TextToken:
			if h.skip == 0 {
				text := z.Text()
				if err := x.spendBytes(text); err != nil {
					return "", err
				}
				h.text(string(text))
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			var alt string
			for hasAttr {
				var key, val []byte
				key, val, hasAttr = z.TagAttr()
				if bytes.Equal(key, []byte("alt")) {
					alt = string(val)
				}
			}
			h.start(string(name), alt, tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			name, _ := z.TagName()
			h.end(string(name))
		}
	}
}

// htmlWriter turns a stream of HTML tokens into text.
type htmlWriter struct {
	main   textWriter
	skip   int // depth inside skipped elements
	pre    int // depth inside <pre>
	preBuf strings.Builder
	lists  []htmlList
	tables []*tableBuilder
	// deepLists and deepTables count the lists and tables open beyond
	// maxNesting, read as part of the one around them.
	deepLists, deepTables int
}

// maxNesting bounds the lists and tables kept open one inside another:
// each holds its own state, and a page of a million nested tables (a few
// megabytes, or a few kilobytes compressed in an EPUB) would hold a
// million. Deeper ones are read as text of the innermost one kept.
const maxNesting = 256

type htmlList struct {
	ordered bool
	next    int
}

// out is where text goes now: the open table cell, else the page. Text
// in a table outside any cell opens one; breaks there (between rows and
// cells) go nowhere, so that they open no empty cells.
func (h *htmlWriter) out() *textWriter {
	if n := len(h.tables); n > 0 {
		return h.tables[n-1].cellWriter()
	}
	return &h.main
}

func (h *htmlWriter) breaks() *textWriter {
	if n := len(h.tables); n > 0 && h.tables[n-1].cell == nil {
		return &textWriter{}
	}
	return h.out()
}

func (h *htmlWriter) text(s string) {
	if n := len(h.tables); n > 0 && h.tables[n-1].cell == nil && strings.TrimSpace(s) == "" {
		return // the white space between a table's tags
	}
	if h.pre > 0 {
		h.preBuf.WriteString(s)
		return
	}
	h.out().words(s)
}

func (h *htmlWriter) start(name, alt string, selfClosing bool) {
	if skippedElements[name] {
		if !selfClosing {
			h.skip++
		}
		return
	}
	if h.skip > 0 {
		return
	}
	w := h.breaks()
	switch {
	case name == "table" && len(h.tables) >= maxNesting:
		h.deepTables++
		return
	case name == "table":
		h.tables = append(h.tables, &tableBuilder{})
		return
	case (name == "tr" || name == "td" || name == "th") && h.deepTables > 0:
		return // the rows and cells of a table read as text
	case name == "tr" && len(h.tables) > 0:
		h.tables[len(h.tables)-1].startRow()
		return
	case (name == "td" || name == "th") && len(h.tables) > 0:
		h.tables[len(h.tables)-1].startCell()
		return
	case (name == "ul" || name == "ol") && len(h.lists) >= maxNesting:
		h.deepLists++
		w.lineBreak(1)
		return
	case name == "ul" || name == "ol":
		// A list inside a list item continues on the next line.
		if len(h.lists) > 0 {
			w.lineBreak(1)
		} else {
			w.lineBreak(2)
		}
		h.lists = append(h.lists, htmlList{ordered: name == "ol", next: 1})
		return
	case name == "li":
		w.lineBreak(1)
		prefix := "- "
		depth := len(h.lists)
		if depth > 0 && h.lists[depth-1].ordered {
			prefix = strconv.Itoa(h.lists[depth-1].next) + ". "
			h.lists[depth-1].next++
		}
		w.setPrefix(strings.Repeat("  ", min(max(depth-1, 0), maxIndent)) + prefix)
		return
	case len(name) == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6':
		w.lineBreak(2)
		w.setPrefix(strings.Repeat("#", int(name[1]-'0')) + " ")
		return
	case name == "pre":
		h.pre++
		return
	case name == "br":
		w.newline()
		return
	case name == "img":
		if alt = strings.TrimSpace(alt); alt != "" {
			h.out().words("[image: " + alt + "]")
		}
		return
	}
	if paragraphElements[name] {
		w.lineBreak(2)
	} else if lineElements[name] {
		w.lineBreak(1)
	}
}

func (h *htmlWriter) end(name string) {
	if skippedElements[name] {
		if h.skip > 0 {
			h.skip--
		}
		return
	}
	if h.skip > 0 {
		return
	}
	switch {
	case name == "table" && h.deepTables > 0:
		h.deepTables--
		return
	case (name == "ul" || name == "ol") && h.deepLists > 0:
		h.deepLists--
		h.breaks().lineBreak(1)
		return
	case name == "table" && len(h.tables) > 0:
		t := h.tables[len(h.tables)-1]
		h.tables = h.tables[:len(h.tables)-1]
		if len(h.tables) > 0 {
			h.out().raw(flattenTable(t.finish())) // a table in a cell: its text
			return
		}
		w := h.out()
		w.lineBreak(2)
		w.raw(markdownTable(t.finish()))
		w.lineBreak(2)
		return
	case (name == "td" || name == "th" || name == "tr") && len(h.tables) > 0:
		return // the next cell or row, or the table's end, closes it
	case name == "ul" || name == "ol":
		if len(h.lists) > 0 {
			h.lists = h.lists[:len(h.lists)-1]
		}
		if len(h.lists) > 0 {
			h.breaks().lineBreak(1)
		} else {
			h.breaks().lineBreak(2)
		}
		return
	case name == "pre" && h.pre > 0:
		h.pre--
		if h.pre == 0 {
			h.flushPre()
		}
		return
	}
	w := h.out()
	if paragraphElements[name] {
		w.lineBreak(2)
	} else if lineElements[name] {
		w.lineBreak(1)
	}
}

// flushPre writes the preformatted text collected since <pre> as a fence.
func (h *htmlWriter) flushPre() {
	text := strings.Trim(h.preBuf.String(), "\n")
	h.preBuf.Reset()
	if strings.TrimSpace(text) == "" {
		return
	}
	w := h.out()
	w.lineBreak(2)
	w.raw(fence("", text))
	w.lineBreak(2)
}

func (h *htmlWriter) finish() string {
	if h.pre > 0 {
		h.pre = 0
		h.flushPre()
	}
	for len(h.tables) > 0 {
		h.end("table") // a table left open at the end of the page
	}
	return h.main.String()
}

// tableBuilder collects the cells of one table.
type tableBuilder struct {
	rows [][]string
	row  []string
	cell *textWriter
}

func (t *tableBuilder) startRow() {
	t.closeRow()
	t.row = []string{}
}

func (t *tableBuilder) startCell() {
	t.closeCell()
	if t.row == nil {
		t.row = []string{}
	}
	t.cell = &textWriter{}
}

// cellWriter is the writer of the open cell, opening one for text that
// sits in a table outside any cell.
func (t *tableBuilder) cellWriter() *textWriter {
	if t.cell == nil {
		t.startCell()
	}
	return t.cell
}

func (t *tableBuilder) closeCell() {
	if t.cell != nil {
		t.row = append(t.row, t.cell.String())
		t.cell = nil
	}
}

func (t *tableBuilder) closeRow() {
	t.closeCell()
	if t.row != nil {
		t.rows = append(t.rows, t.row)
		t.row = nil
	}
}

func (t *tableBuilder) finish() [][]string {
	t.closeRow()
	return t.rows
}

// textWriter builds text from words and breaks: runs of white space
// collapse to one space, and asked-for line breaks are written only before
// the next text, so that empty elements leave no blank lines behind.
type textWriter struct {
	b         strings.Builder
	space     bool   // a space is due before the next word
	newlines  int    // line breaks due before the next text
	prefix    string // list marker or heading marks for the next text
	lineStart bool
}

func (w *textWriter) lineBreak(n int) {
	w.newlines = max(w.newlines, n)
}

// newline is a <br>: a line break even between two pieces of text on the
// same line, and one more when another follows.
func (w *textWriter) newline() {
	if w.newlines > 0 {
		w.newlines++
	} else {
		w.newlines = 1
	}
	w.newlines = min(w.newlines, 2)
}

func (w *textWriter) setPrefix(p string) { w.prefix = p }

// flush writes what is due before new text.
func (w *textWriter) flush() {
	if w.b.Len() > 0 && w.newlines > 0 {
		w.b.WriteString(strings.Repeat("\n", w.newlines))
		w.lineStart = true
	} else if w.b.Len() > 0 && w.space && !w.lineStart {
		w.b.WriteByte(' ')
	}
	if w.prefix != "" {
		w.b.WriteString(w.prefix)
		w.prefix = ""
	}
	w.newlines, w.space = 0, false
}

func (w *textWriter) words(s string) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		if s != "" {
			w.space = true
		}
		return
	}
	if isSpaceByte(s[0]) {
		w.space = true
	}
	for i, f := range fields {
		if i > 0 {
			w.space = true
		}
		w.flush()
		w.b.WriteString(f)
		w.lineStart = false
	}
	w.space = isSpaceByte(s[len(s)-1])
}

// raw writes s as it is (preformatted text, a finished table).
func (w *textWriter) raw(s string) {
	if s == "" {
		return
	}
	w.flush()
	w.b.WriteString(s)
	w.lineStart = strings.HasSuffix(s, "\n")
}

func (w *textWriter) String() string { return strings.TrimSpace(w.b.String()) }

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
