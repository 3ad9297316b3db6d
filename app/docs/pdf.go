package docs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ledongthuc/pdf"
	"golang.org/x/text/width"
)

// pdf reads a PDF through github.com/ledongthuc/pdf (pure Go, a maintained
// descendant of rsc.io/pdf): every page's positioned characters, put in
// reading order by pdfPageText, under a "--- Page N ---" line. A page
// without text says so in the text; a document without text on any page
// (a scan) is an ErrNoTextLayer error, since text recognition is not
// something Suzuran does.
func (x *extraction) pdf() (string, int, error) {
	const what = "PDF document"
	r, err := openPDF(x.data)
	if err != nil {
		if strings.Contains(err.Error(), "encrypt") || errors.Is(err, pdf.ErrInvalidPassword) {
			return "", 0, failure(x.name, ErrEncrypted, "is protected by a password; open it, save or print a copy without the password, and attach that")
		}
		return "", 0, damaged(x.name, what, err)
	}
	pages, err := pageCount(r)
	if err != nil {
		return "", 0, damaged(x.name, what, err)
	}
	if pages == 0 {
		return "", 0, damaged(x.name, what, fmt.Errorf("it has no pages"))
	}
	if err := x.checkPages(pages, "pages"); err != nil {
		return "", 0, err
	}
	var b strings.Builder
	var empty []int
	for i := 1; i <= pages; i++ {
		if err := x.check(); err != nil {
			return "", 0, err
		}
		glyphs, err := pageGlyphs(r, i)
		if err != nil {
			return "", 0, damaged(x.name, what, fmt.Errorf("page %d: %v", i, err))
		}
		text := pdfPageText(glyphs)
		if i > 1 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "--- Page %d ---\n", i)
		if strings.TrimSpace(text) == "" {
			empty = append(empty, i)
			b.WriteString("[This page has no text layer: it is probably a scanned image, which cannot be read.]")
		} else {
			b.WriteString(text)
		}
		x.report(int64(i), int64(pages), "pages")
	}
	if len(empty) == pages {
		return "", 0, failure(x.name, ErrNoTextLayer, "has no text layer on any of its %d pages: it is probably scanned images of paper. Suzuran cannot read images yet; run text recognition (OCR) on it first, for example with Preview's or Acrobat's export, and attach the result", pages)
	}
	if len(empty) > 0 {
		x.note("%d of %d pages have no text layer (scanned images?): %s", len(empty), pages, pageList(empty))
	}
	return b.String(), pages, nil
}

// openPDF opens a PDF. The library accepts only %PDF-1.0 to 1.7 headers;
// a PDF 2.0 file differs from 1.7 in nothing the text needs, so its
// header is shown to the library as 1.7 (same length, no offset moves).
func openPDF(data []byte) (r *pdf.Reader, err error) {
	defer recoverAs(&err)
	var at io.ReaderAt = bytes.NewReader(data)
	if len(data) > 9 && bytes.HasPrefix(data, []byte("%PDF-")) && !bytes.HasPrefix(data, []byte("%PDF-1.")) {
		at = &patchedHeader{ReaderAt: at, header: []byte("%PDF-1.7")}
	}
	return pdf.NewReader(at, int64(len(data)))
}

func pageCount(r *pdf.Reader) (n int, err error) {
	defer recoverAs(&err)
	return r.NumPage(), nil
}

// pageGlyphs reads the characters of page i (1-based). The library reports
// malformed content by panicking; that becomes an error.
func pageGlyphs(r *pdf.Reader, i int) (glyphs []glyph, err error) {
	defer recoverAs(&err)
	page := r.Page(i)
	if page.V.IsNull() {
		return nil, fmt.Errorf("the page is missing from the page tree")
	}
	for _, t := range page.Content().Text {
		glyphs = append(glyphs, glyph{x: t.X, y: t.Y, w: t.W, size: t.FontSize, s: t.S})
	}
	return spreadRuns(glyphs), nil
}

// spreadRuns places the characters of text runs the library could not
// measure. For fonts with two-byte codes (Type0, which Word and
// LibreOffice use for all text) it reports no widths and puts every
// character of a run at the run's start; the layout needs extents, so
// each such character is moved along by an estimated advance: a full em
// for East Asian wide characters, half an em for the rest.
func spreadRuns(glyphs []glyph) []glyph {
	for i := 1; i < len(glyphs); i++ {
		prev, g := &glyphs[i-1], &glyphs[i]
		if g.w != 0 || prev.w != 0 && !prev.estimated {
			continue
		}
		if prev.x == g.x && prev.y == g.y || prev.estimated && prev.runX == g.x && prev.y == g.y {
			if !prev.estimated {
				prev.runX, prev.w, prev.estimated = prev.x, estimatedAdvance(*prev), true
			}
			g.runX = prev.runX
			g.x = prev.x + prev.w
			g.w, g.estimated = estimatedAdvance(*g), true
		}
	}
	return glyphs
}

func estimatedAdvance(g glyph) float64 {
	adv := 0.0
	for _, r := range g.s {
		switch width.LookupRune(r).Kind() {
		case width.EastAsianWide, width.EastAsianFullwidth:
			adv += g.size
		default:
			adv += 0.5 * g.size
		}
	}
	return adv
}

func recoverAs(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("malformed PDF: %v", r)
	}
}

// patchedHeader shows a different header over the first bytes of a file.
type patchedHeader struct {
	io.ReaderAt
	header []byte
}

func (p *patchedHeader) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.ReaderAt.ReadAt(b, off)
	for i := 0; i < n; i++ {
		if pos := off + int64(i); pos < int64(len(p.header)) {
			b[i] = p.header[pos]
		}
	}
	return n, err
}

// pageList writes page numbers compactly: 1–3, 7.
func pageList(pages []int) string {
	var parts []string
	for i := 0; i < len(pages); {
		j := i
		for j+1 < len(pages) && pages[j+1] == pages[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d–%d", pages[i], pages[j]))
		} else {
			parts = append(parts, fmt.Sprint(pages[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
