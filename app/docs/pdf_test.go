package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The PDFs of testdata (see its README) against their exact text: reading
// order across two columns (Type1 fonts from groff and two-byte TrueType
// fonts from gopdf), a table's rows, numbered pages, CJK text.
func TestPDF(t *testing.T) {
	cases := []struct {
		file  string
		pages int
	}{
		{"two-column", 1},
		{"table", 2},
		{"cjk", 3},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			doc := mustExtract(t, c.file+".pdf", readTestdata(t, c.file+".pdf"))
			want := string(readTestdata(t, c.file+".txt"))
			if doc.Text != want {
				t.Errorf("text\n%s\nwant\n%s", doc.Text, want)
			}
			if doc.Format != FormatPDF || doc.Pages != c.pages || doc.PageUnit != "pages" {
				t.Errorf("format %s, %d %s; want pdf, %d pages", doc.Format, doc.Pages, doc.PageUnit, c.pages)
			}
		})
	}
}

// The left column is read whole before the right one, and the title that
// spans both comes first: checked apart from the golden text, so that a
// change of the golden file cannot quietly accept a wrong order.
func TestPDFColumnOrder(t *testing.T) {
	doc := mustExtract(t, "two-column.pdf", readTestdata(t, "two-column.pdf"))
	order := []string{"Lilies of the Valley", "First paragraph.", "Second paragraph.", "Third paragraph.", "Fourth paragraph."}
	at := -1
	for _, s := range order {
		i := strings.Index(doc.Text, s)
		if i <= at {
			t.Fatalf("%q at %d, not after the text before it (%d):\n%s", s, i, at, doc.Text)
		}
		at = i
	}
	cjk := mustExtract(t, "cjk.pdf", readTestdata(t, "cjk.pdf"))
	if i, j := strings.Index(cjk.Text, "左の段の四行目です。"), strings.Index(cjk.Text, "右の段の一行目です。"); i < 0 || j < i {
		t.Errorf("cjk.pdf: right column (at %d) not after the left one (at %d)", j, i)
	}
}

func TestPDFErrors(t *testing.T) {
	scanned := readTestdata(t, "scanned.pdf")
	table := readTestdata(t, "table.pdf")
	cases := []struct {
		name string
		data []byte
		kind error
		msg  string
	}{
		{"scanned.pdf", scanned, ErrNoTextLayer, "scanned.pdf: has no text layer on any of its 1 pages: it is probably scanned images of paper. Suzuran cannot read images yet; run text recognition (OCR) on it first, for example with Preview's or Acrobat's export, and attach the result"},
		{"cut.pdf", table[:len(table)/2], ErrDamaged, "cut.pdf: is not a readable PDF document (not a PDF file: missing %%EOF); open it in the program that made it, save a new copy and attach that"},
		{"header.pdf", []byte("%PDF-1.4\n%" + strings.Repeat("x", 200) + "\n%%EOF\n"), ErrDamaged, "header.pdf: is not a readable PDF document (malformed PDF file: missing final startxref); open it in the program that made it, save a new copy and attach that"},
		// A page tree that lists itself among its kids (found by FuzzPDF:
		// the library's own walk never ends) and a page whose Parent chain
		// loops back to it (the library's lookup of inherited resources
		// never ends).
		{"tree-loop.pdf", pdfOf(`<< /Type /Catalog /Pages 2 0 R >>`, `<< /Type /Pages /Kids [2 0 R] /Count 1 >>`),
			ErrDamaged, "tree-loop.pdf: is not a readable PDF document (its page tree is more than 64 levels deep: it contains itself); open it in the program that made it, save a new copy and attach that"},
		{"parent-loop.pdf", pdfOf(`<< /Type /Catalog /Pages 2 0 R >>`, `<< /Type /Pages /Kids [3 0 R] /Count 1 >>`,
			`<< /Type /Page /Parent 4 0 R /Contents 5 0 R >>`, `<< /Type /Pages /Parent 3 0 R >>`, "<< /Length 0 >>\nstream\n\nendstream"),
			ErrDamaged, "parent-loop.pdf: is not a readable PDF document (page 1: its Parent chain is more than 64 levels deep: it contains itself); open it in the program that made it, save a new copy and attach that"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := extract(t, c.name, c.data)
			if !errors.Is(err, c.kind) || err.Error() != c.msg {
				t.Errorf("got %v\nwant %s", err, c.msg)
			}
		})
	}
}

// Progress counts pages as they are read.
func TestPDFProgress(t *testing.T) {
	var pages []int64
	_, err := Extract(context.Background(), "cjk.pdf", readTestdata(t, "cjk.pdf"), Options{Progress: func(p Progress) {
		if p.Unit == "pages" {
			if p.Total != 3 {
				t.Errorf("total %d pages, want 3", p.Total)
			}
			pages = append(pages, p.Done)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pages) != "[1 2 3]" {
		t.Errorf("progress %v, want [1 2 3]", pages)
	}
}

// pdfOf writes a PDF of the given objects (numbered from 1, the first the
// catalogue) with a correct cross-reference table.
func pdfOf(objects ...string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, xref)
	return b.Bytes()
}

// Once the extraction's context ends, the PDF library cannot read another
// byte: whatever loop it is in stops with an error at its next read.
func TestPDFStopsWithContext(t *testing.T) {
	data := readTestdata(t, "table.pdf")
	ctx, cancel := context.WithCancel(context.Background())
	r, err := openPDF(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := pageTree(r, 2)
	if err != nil || len(leaves) != 2 {
		t.Fatalf("%d pages, %v", len(leaves), err)
	}
	cancel()
	if _, err := pageGlyphs(leaves, 1); err == nil || !strings.Contains(err.Error(), "extraction stopped") {
		t.Errorf("reading a page after cancel: %v", err)
	}
	if _, err := openPDF(ctx, data); err == nil || !strings.Contains(err.Error(), "extraction stopped") {
		t.Errorf("opening after cancel: %v", err)
	}
}
