package docs

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
	"golang.org/x/text/encoding/japanese"
)

// benchDocuments builds one document of each format, a few megabytes
// where the format allows it; the PDFs are the test documents.
func benchDocuments(b *testing.B) map[string][]byte {
	b.Helper()
	var prose strings.Builder
	for i := 0; prose.Len() < 8<<20; i++ {
		fmt.Fprintf(&prose, "Line %d: lilies of the valley flower in late spring, 鈴蘭は春に咲きます。\n", i)
	}
	var csv strings.Builder
	csv.WriteString("Item,Colour,Count,Note\n")
	for i := 0; csv.Len() < 4<<20; i++ {
		fmt.Fprintf(&csv, "Lily %d,White,%d,\"shade, moist soil\"\n", i, i%500)
	}
	var html strings.Builder
	html.WriteString("<html><head><style>p{}</style></head><body>")
	for i := 0; html.Len() < 4<<20; i++ {
		fmt.Fprintf(&html, "<h2>Section %d</h2><p>Lilies of the <b>valley</b> flower in late spring.</p><ul><li>one</li><li>two</li></ul><table><tr><td>a</td><td>%d</td></tr></table>", i, i)
	}
	html.WriteString("</body></html>")
	var body strings.Builder
	for i := 0; body.Len() < 4<<20; i++ {
		body.WriteString(para("", 0, 0, fmt.Sprintf("Paragraph %d about lilies of the valley, in two ", i), "runs."))
		if i%50 == 0 {
			body.WriteString(para("Heading1", 0, 0, "Heading") + `<w:tbl><w:tr>` + cell("a") + cell("b") + `</w:tr></w:tbl>`)
		}
	}
	var chapters []string
	for c := 0; c < 20; c++ {
		var ch strings.Builder
		for i := 0; i < 2000; i++ {
			fmt.Fprintf(&ch, "<p>Chapter %d, paragraph %d: lilies of the valley.</p>", c, i)
		}
		chapters = append(chapters, ch.String())
	}
	var rtf strings.Builder
	rtf.WriteString(`{\rtf1\ansi\ansicpg1252{\fonttbl{\f0 Arial;}{\f1\fcharset128 MS Mincho;}}`)
	for i := 0; rtf.Len() < 4<<20; i++ {
		fmt.Fprintf(&rtf, `\f0 Paragraph %d, caf\'e9 \b bold\b0  text.\par\f1 \'97\'e9\'97\'96\par`, i)
	}
	rtf.WriteString("}")
	wb := excelize.NewFile()
	sw, err := wb.NewStreamWriter("Sheet1")
	if err != nil {
		b.Fatal(err)
	}
	for r := 1; r <= 50000; r++ {
		cellName, _ := excelize.CoordinatesToCellName(1, r)
		if err := sw.SetRow(cellName, []any{"Lily", r, float64(r) / 4, "white, scented"}); err != nil {
			b.Fatal(err)
		}
	}
	if err := sw.Flush(); err != nil {
		b.Fatal(err)
	}
	var xlsx bytes.Buffer
	if err := wb.Write(&xlsx); err != nil {
		b.Fatal(err)
	}
	sjis, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte(strings.Repeat(japanese1+"\n", 40000)))
	if err != nil {
		b.Fatal(err)
	}
	docs := map[string][]byte{
		"text.txt":       []byte(prose.String()),
		"shift_jis.txt":  sjis,
		"table.csv":      []byte(csv.String()),
		"page.html":      []byte(html.String()),
		"document.docx":  docxOf(b, body.String()),
		"workbook.xlsx":  xlsx.Bytes(),
		"book.epub":      epubOf(b, chapters...),
		"letter.rtf":     []byte(rtf.String()),
		"two-column.pdf": nil,
		"table.pdf":      nil,
		"cjk.pdf":        nil,
	}
	for name := range docs {
		if strings.HasSuffix(name, ".pdf") {
			data, err := readTestdataFile(name)
			if err != nil {
				b.Fatal(err)
			}
			docs[name] = data
		}
	}
	return docs
}

// BenchmarkExtract reports each format's extraction speed in MB/s of the
// file's bytes and of the text written (BENCHMARKS.md, "Document
// extraction").
func BenchmarkExtract(b *testing.B) {
	documents := benchDocuments(b)
	for _, name := range []string{"text.txt", "shift_jis.txt", "table.csv", "page.html", "two-column.pdf", "table.pdf", "cjk.pdf", "document.docx", "workbook.xlsx", "book.epub", "letter.rtf"} {
		data := documents[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var textBytes int
			for b.Loop() {
				doc, err := Extract(context.Background(), name, data, Options{})
				if err != nil || doc.Text == "" {
					b.Fatal(err)
				}
				textBytes = len(doc.Text)
			}
			// Compressed formats are small on disk: the text written per
			// second compares the formats better.
			b.ReportMetric(float64(textBytes)*float64(b.N)/b.Elapsed().Seconds()/1e6, "text-MB/s")
			b.ReportMetric(float64(textBytes), "text-bytes")
		})
	}
}

// BenchmarkCountTokens measures counting a document's tokens with the demo
// model's tokenizer (the Qwen pipeline with a small vocabulary), the other
// half of attaching a large document.
func BenchmarkCountTokens(b *testing.B) {
	var prose strings.Builder
	for i := 0; prose.Len() < 4<<20; i++ {
		fmt.Fprintf(&prose, "Line %d: lilies of the valley flower in late spring, 鈴蘭は春に咲きます。\n", i)
	}
	text := prose.String()
	tok := demoTok(b)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := CountTokens(context.Background(), tok, text, nil); err != nil {
			b.Fatal(err)
		}
	}
}
