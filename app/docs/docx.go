package docs

import (
	"archive/zip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
)

// docx reads a Word document (Office Open XML): the main document part in
// order, paragraphs as paragraphs, headings (by style or outline level) as
// Markdown headings, list items with their bullet or number, tables as
// Markdown tables. Deleted text of tracked changes, field codes and the
// fallback copies of drawings are left out; links keep their text only.
//
// It reads the XML itself with encoding/xml: the Go DOCX libraries we
// looked at either write documents only, drop styles and numbering (no
// headings or list numbers), or carry a commercial licence.
func (x *extraction) docx() (string, error) {
	const what = "Word document"
	zr, err := x.openZip(what)
	if err != nil {
		return "", err
	}
	mainPart := "word/document.xml"
	if rels := zipFile(zr, "_rels/.rels"); rels != nil {
		if target, err := x.officeDocumentTarget(rels, what); err != nil {
			return "", err
		} else if target != "" {
			mainPart = path.Clean(strings.TrimPrefix(target, "/"))
		}
	}
	doc := zipFile(zr, mainPart)
	if doc == nil {
		return "", damaged(x.name, what, fmt.Errorf("it has no %s part", mainPart))
	}
	dir := path.Dir(mainPart)
	w := &docxReader{x: x, headingLevels: map[string]int{}, numFormats: map[string]string{}, counters: map[string]int{}}
	if f := zipFile(zr, path.Join(dir, "styles.xml")); f != nil {
		if err := w.readStyles(f, what); err != nil {
			return "", err
		}
	}
	if f := zipFile(zr, path.Join(dir, "numbering.xml")); f != nil {
		if err := w.readNumbering(f, what); err != nil {
			return "", err
		}
	}
	return w.readDocument(doc, what)
}

// officeDocumentTarget finds the main part named by the package's
// relationships.
func (x *extraction) officeDocumentTarget(rels *zip.File, what string) (string, error) {
	var target string
	err := x.walkPart(rels, what, func(d *xml.Decoder, t xml.Token) error {
		if se, ok := t.(xml.StartElement); ok && se.Name.Local == "Relationship" {
			if strings.HasSuffix(attr(se, "Type"), "/officeDocument") {
				target = attr(se, "Target")
			}
		}
		return nil
	})
	return target, err
}

// maxXMLDepth bounds the nesting of an XML part's elements: the decoder
// and the readers keep state for each open one. Word nests a few tens
// deep (tables in tables); 5 MB of <w:p> would nest a million.
const maxXMLDepth = 1000

// walkXML streams the tokens of an XML part to visit, refusing DOCTYPEs,
// elements nested more than maxXMLDepth deep,
// checking the context every few thousand tokens, and refusing a part
// with more than maxRun bytes between two tags (the decoder would hold
// them all at once).
func (x *extraction) walkXML(r io.Reader, part string, visit func(*xml.Decoder, xml.Token) error) error {
	depth := 0
	d := xmlDecoder(&runGuard{r: r, err: failure(x.name, ErrTextLimit, "has a single piece of text or markup longer than %s in its part %s; no real document does, and it was not read", bytesize.Format(maxRun), part)})
	for i := 0; ; i++ {
		if i%4096 == 0 {
			if err := x.check(); err != nil {
				return err
			}
		}
		t, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var known *Error
			if errors.As(err, &known) {
				return err // a limit, from the part's reader
			}
			return damaged(x.name, "document", fmt.Errorf("part %s: %v", part, err))
		}
		switch t := t.(type) {
		case xml.Directive:
			if err := checkDirective(t); errors.Is(err, errDoctype) {
				return x.unsafeXML(part)
			}
		case xml.StartElement:
			if depth++; depth > maxXMLDepth {
				return damaged(x.name, "document", fmt.Errorf("part %s nests elements more than %s deep; no real document does", part, thousands(maxXMLDepth)))
			}
		case xml.EndElement:
			depth--
		}
		if err := visit(d, t); err != nil {
			return err
		}
	}
}

// attr returns the value of the attribute with the given local name.
func attr(se xml.StartElement, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// docxReader holds what the document part needs from the other parts.
type docxReader struct {
	x             *extraction
	headingLevels map[string]int    // style id → heading level
	numFormats    map[string]string // numId/ilvl → numFmt ("bullet", "decimal", …)
	counters      map[string]int    // numId/ilvl → last number written
}

func (r *docxReader) readStyles(f *zip.File, what string) error {
	var id string
	return r.x.walkPart(f, what, func(d *xml.Decoder, t xml.Token) error {
		se, ok := t.(xml.StartElement)
		if !ok {
			return nil
		}
		switch se.Name.Local {
		case "style":
			id = attr(se, "styleId")
		case "name":
			name := strings.ToLower(attr(se, "val"))
			if level, ok := strings.CutPrefix(name, "heading "); ok {
				if n, err := strconv.Atoi(level); err == nil && n >= 1 && n <= 9 {
					r.headingLevels[id] = min(n, 6)
				}
			} else if name == "title" {
				r.headingLevels[id] = 1
			}
		case "outlineLvl":
			if n, err := strconv.Atoi(attr(se, "val")); err == nil && n < 9 && id != "" {
				if _, set := r.headingLevels[id]; !set {
					r.headingLevels[id] = min(n+1, 6)
				}
			}
		}
		return nil
	})
}

func (r *docxReader) readNumbering(f *zip.File, what string) error {
	abstractFormats := map[string]map[string]string{} // abstractNumId → ilvl → numFmt
	numToAbstract := map[string]string{}
	var abstractID, level, numID string
	err := r.x.walkPart(f, what, func(d *xml.Decoder, t xml.Token) error {
		se, ok := t.(xml.StartElement)
		if !ok {
			return nil
		}
		switch se.Name.Local {
		case "abstractNum":
			abstractID = attr(se, "abstractNumId")
			abstractFormats[abstractID] = map[string]string{}
		case "lvl":
			level = attr(se, "ilvl")
		case "numFmt":
			if m := abstractFormats[abstractID]; m != nil {
				m[level] = attr(se, "val")
			}
		case "num":
			numID = attr(se, "numId")
		case "abstractNumId":
			numToAbstract[numID] = attr(se, "val")
		}
		return nil
	})
	if err != nil {
		return err
	}
	for num, abstract := range numToAbstract {
		for lvl, format := range abstractFormats[abstract] {
			r.numFormats[num+"/"+lvl] = format
		}
	}
	return nil
}

// docxParagraph is a paragraph being read.
type docxParagraph struct {
	style   string
	outline int // outline level + 1, 0 when none
	numID   string
	level   int
	text    strings.Builder
}

// docxTable collects a table being read.
type docxTable struct {
	rows [][]string
	row  []string
	cell []string // the cell's paragraphs
	in   bool     // inside a cell
	// spans is how many empty cells follow the current one (gridSpan).
	spans int
}

// docxBlock is one written paragraph: list items are joined by one line
// break, everything else by a blank line.
type docxBlock struct {
	text     string
	listItem bool
}

func (r *docxReader) readDocument(f *zip.File, what string) (string, error) {
	w := &docxWalk{r: r}
	err := r.x.walkPart(f, what, func(d *xml.Decoder, t xml.Token) error {
		switch t := t.(type) {
		case xml.StartElement:
			w.depth++
			if w.skipDepth == 0 {
				w.start(t)
			}
		case xml.EndElement:
			if w.skipDepth > 0 {
				if w.depth == w.skipDepth {
					w.skipDepth = 0
				}
			} else {
				w.end(t)
			}
			w.depth--
		case xml.CharData:
			if w.inText && w.skipDepth == 0 {
				if err := r.x.spendBytes(t); err != nil {
					return err
				}
				w.paragraphs[len(w.paragraphs)-1].text.Write(t)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if w.depth != 0 {
		return "", damaged(r.x.name, what, fmt.Errorf("part %s ends before its elements close", f.Name))
	}
	return w.text(), nil
}

// docxWalk is where readDocument stands in word/document.xml: the
// paragraphs and tables open around it, and the blocks written so far.
type docxWalk struct {
	r          *docxReader
	blocks     []docxBlock
	paragraphs []*docxParagraph
	tables     []*docxTable
	inText     bool
	skipDepth  int // inside mc:Fallback, whose content repeats mc:Choice
	depth      int
}

// emit writes a block: into the cell of the table open, else the document.
func (w *docxWalk) emit(text string, listItem bool) {
	if n := len(w.tables); n > 0 && w.tables[n-1].in {
		w.tables[n-1].cell = append(w.tables[n-1].cell, text)
		return
	}
	w.blocks = append(w.blocks, docxBlock{text, listItem})
}

// start takes an element's opening.
func (w *docxWalk) start(t xml.StartElement) {
	p := (*docxParagraph)(nil)
	if n := len(w.paragraphs); n > 0 {
		p = w.paragraphs[n-1]
	}
	switch t.Name.Local {
	case "Fallback":
		w.skipDepth = w.depth
	case "p":
		w.paragraphs = append(w.paragraphs, &docxParagraph{})
	case "pStyle":
		if p != nil {
			p.style = attr(t, "val")
		}
	case "outlineLvl":
		if n, err := strconv.Atoi(attr(t, "val")); err == nil && p != nil && n < 9 {
			p.outline = n + 1
		}
	case "numId":
		if p != nil {
			p.numID = attr(t, "val")
		}
	case "ilvl":
		if n, err := strconv.Atoi(attr(t, "val")); err == nil && p != nil {
			p.level = min(max(n, 0), maxIndent)
		}
	case "t":
		w.inText = p != nil
	case "tab", "ptab":
		if p != nil && len(w.paragraphs) > 0 && inRun(t) {
			p.text.WriteByte('\t')
		}
	case "br", "cr":
		if p != nil {
			p.text.WriteByte('\n')
		}
	case "noBreakHyphen":
		if p != nil {
			p.text.WriteByte('-')
		}
	case "tbl":
		w.tables = append(w.tables, &docxTable{})
	case "tr":
		if n := len(w.tables); n > 0 {
			w.tables[n-1].row = []string{}
		}
	case "tc":
		if n := len(w.tables); n > 0 {
			w.tables[n-1].in, w.tables[n-1].cell = true, nil
		}
	case "gridSpan":
		// A cell merged across n grid columns: n-1 empty cells
		// after it keep the columns of the Markdown table aligned.
		if n := len(w.tables); n > 0 {
			if span, err := strconv.Atoi(attr(t, "val")); err == nil && span > 1 {
				w.tables[n-1].cellSpan(min(span, 64) - 1)
			}
		}
	}
}

// end takes an element's closing.
func (w *docxWalk) end(t xml.EndElement) {
	switch t.Name.Local {
	case "t":
		w.inText = false
	case "p":
		n := len(w.paragraphs)
		if n == 0 {
			return
		}
		p := w.paragraphs[n-1]
		w.paragraphs = w.paragraphs[:n-1]
		text, listItem := w.r.paragraphText(p)
		if text != "" {
			w.emit(text, listItem)
		}
	case "tc":
		if n := len(w.tables); n > 0 {
			tb := w.tables[n-1]
			tb.row = append(tb.row, strings.Join(tb.cell, "\n"))
			tb.cell, tb.in = nil, false
			tb.row = append(tb.row, tb.pending()...)
		}
	case "tr":
		if n := len(w.tables); n > 0 {
			w.tables[n-1].rows = append(w.tables[n-1].rows, w.tables[n-1].row)
			w.tables[n-1].row = nil
		}
	case "tbl":
		if n := len(w.tables); n > 0 {
			tb := w.tables[n-1]
			w.tables = w.tables[:n-1]
			table := markdownTable(tb.rows)
			if len(w.tables) > 0 {
				table = flattenTable(tb.rows) // a table in a cell
			}
			if table != "" {
				w.emit(table, false)
			}
		}
	}
}

// text joins the blocks written: list items by one line break, everything
// else by a blank line.
func (w *docxWalk) text() string {
	var b strings.Builder
	for i, blk := range w.blocks {
		if i > 0 {
			if blk.listItem && w.blocks[i-1].listItem {
				b.WriteString("\n")
			} else {
				b.WriteString("\n\n")
			}
		}
		b.WriteString(blk.text)
	}
	return b.String()
}

// inRun is true for a w:tab that is text (inside a run), not a tab stop
// definition of paragraph properties, which uses the same element name.
func inRun(t xml.StartElement) bool {
	return attr(t, "pos") == "" && attr(t, "leader") == ""
}

// cellSpan records empty cells to add after the current one.
func (t *docxTable) cellSpan(n int) {
	t.spans = n
}

// pending returns the empty cells of a gridSpan and clears them.
func (t *docxTable) pending() []string {
	n := t.spans
	t.spans = 0
	return make([]string, n)
}

// paragraphText writes a paragraph with its heading marks or list marker.
func (r *docxReader) paragraphText(p *docxParagraph) (string, bool) {
	text := strings.TrimSpace(p.text.String())
	if text == "" {
		return "", false
	}
	level := r.headingLevels[p.style]
	if p.outline > 0 {
		level = min(p.outline, 6)
	}
	if level > 0 && !strings.Contains(text, "\n") {
		return strings.Repeat("#", level) + " " + text, false
	}
	if p.numID != "" && p.numID != "0" {
		key := p.numID + "/" + strconv.Itoa(p.level)
		format := r.numFormats[key]
		// A new item resets the numbering of the levels below it.
		for deeper := p.level + 1; deeper <= maxIndent; deeper++ {
			delete(r.counters, p.numID+"/"+strconv.Itoa(deeper))
		}
		indent := strings.Repeat("  ", p.level)
		if format == "bullet" || format == "none" || format == "" {
			return indent + "- " + text, true
		}
		r.counters[key]++
		return indent + strconv.Itoa(r.counters[key]) + ". " + text, true
	}
	return text, false
}
