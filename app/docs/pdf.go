package docs

import (
	"bytes"
	"context"
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
	r, err := openPDF(x.ctx, x.data)
	if err != nil {
		if err := x.check(); err != nil {
			return "", 0, err
		}
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
	leaves, err := pageTree(r, pages)
	if err != nil {
		if err := x.check(); err != nil {
			return "", 0, err
		}
		return "", 0, damaged(x.name, what, err)
	}
	var b strings.Builder
	var empty []int
	for i := 1; i <= pages; i++ {
		if err := x.check(); err != nil {
			return "", 0, err
		}
		if i <= len(leaves) {
			if err := x.scanPage(leaves[i-1], i); err != nil {
				var known *Error
				if cerr := x.check(); cerr != nil {
					return "", 0, cerr
				} else if errors.As(err, &known) {
					return "", 0, err
				}
				return "", 0, damaged(x.name, what, fmt.Errorf("page %d: %v", i, err))
			}
		}
		glyphs, err := pageGlyphs(leaves, i)
		if err != nil {
			if err := x.check(); err != nil {
				return "", 0, err
			}
			return "", 0, damaged(x.name, what, fmt.Errorf("page %d: %v", i, err))
		}
		for _, g := range glyphs {
			if err := x.spendString(g.s); err != nil {
				return "", 0, err
			}
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
//
// The library reads the file as it resolves each object, and follows
// references between objects without bound: a page tree, a Parent chain or
// an object stream that refers to itself loops forever. So every read
// checks ctx, and once it has ended stops the library (stopReading), which
// no loop of it can outlast.
func openPDF(ctx context.Context, data []byte) (r *pdf.Reader, err error) {
	defer recoverAs(&err)
	var at io.ReaderAt = contextReader{ReaderAt: bytes.NewReader(data), ctx: ctx}
	if len(data) > 9 && bytes.HasPrefix(data, []byte("%PDF-")) && !bytes.HasPrefix(data, []byte("%PDF-1.")) {
		at = &patchedHeader{ReaderAt: at, header: []byte("%PDF-1.7")}
	}
	return pdf.NewReader(at, int64(len(data)))
}

// contextReader is a file that cannot be read once ctx has ended: a read
// then panics with stopReading, which recoverAs turns into an error.
type contextReader struct {
	io.ReaderAt
	ctx context.Context
}

func (c contextReader) ReadAt(b []byte, off int64) (int, error) {
	if c.ctx.Err() != nil {
		panic(stopReading{})
	}
	return c.ReaderAt.ReadAt(b, off)
}

// stopReading is the panic that stops the PDF library when the extraction
// is cancelled or out of time. It is a runtime.Error because the library
// recovers from its own parse panics inside some loops and keeps reading,
// but re-panics runtime errors, which it takes for bugs: so this one
// always reaches recoverAs.
type stopReading struct{}

func (stopReading) Error() string { return "extraction stopped" }
func (stopReading) RuntimeError() {}

// The bounds of a page tree walk: real trees are a few levels deep (a
// balanced tree of a million pages with ten kids a node has six), and a
// walk deeper than maxTreeDepth is a tree that contains itself.
const maxTreeDepth = 64

// pageTree lists the leaf pages of a PDF in order, walking the tree from
// the catalogue as the library's Page(i) would, but bounded: the library
// walks into a node that lists itself among its kids forever. It stops
// once it has found pages+1 leaves (more than the catalogue declares is
// as far as anyone reads), and visits at most a few nodes per page, so
// that a tree whose nodes share kids cannot grow the walk exponentially.
func pageTree(r *pdf.Reader, pages int) (leaves []pdf.Value, err error) {
	defer recoverAs(&err)
	type node struct {
		v     pdf.Value
		depth int
	}
	budget := 4*pages + 1000
	stack := []node{{r.Trailer().Key("Root").Key("Pages"), 0}}
	for len(stack) > 0 && len(leaves) <= pages {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if budget--; budget < 0 {
			return nil, fmt.Errorf("its page tree has more nodes than its %d pages need", pages)
		}
		switch n.v.Key("Type").Name() {
		case "Page":
			leaves = append(leaves, n.v)
		case "Pages":
			if n.depth >= maxTreeDepth {
				return nil, fmt.Errorf("its page tree is more than %d levels deep: it contains itself", maxTreeDepth)
			}
			kids := n.v.Key("Kids")
			for i := kids.Len() - 1; i >= 0; i-- { // pushed in reverse: popped in order
				stack = append(stack, node{kids.Index(i), n.depth + 1})
			}
		}
	}
	return leaves, nil
}

func pageCount(r *pdf.Reader) (n int, err error) {
	defer recoverAs(&err)
	return r.NumPage(), nil
}

// pageGlyphs reads the characters of page i (1-based) of the leaves that
// pageTree found. The library reports malformed content by panicking;
// that becomes an error.
func pageGlyphs(leaves []pdf.Value, i int) (glyphs []glyph, err error) {
	defer recoverAs(&err)
	if i > len(leaves) {
		return nil, fmt.Errorf("the page is missing from the page tree")
	}
	page := pdf.Page{V: leaves[i-1]}
	// The library looks up the page's resources through its Parent chain
	// without bound; a chain that loops would never end.
	for v, depth := page.V, 0; !v.IsNull() && v.Key("Resources").IsNull(); v, depth = v.Key("Parent"), depth+1 {
		if depth > maxTreeDepth {
			return nil, fmt.Errorf("its Parent chain is more than %d levels deep: it contains itself", maxTreeDepth)
		}
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
