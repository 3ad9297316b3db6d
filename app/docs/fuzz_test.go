package docs

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// The names the fuzzer picks from: one per extractor, and one without an
// extension for the content sniffing.
var fuzzNames = []string{"a.txt", "a.md", "a.go", "a.csv", "a.tsv", "a.json", "a.html", "a.pdf", "a.docx", "a.xlsx", "a.epub", "a.rtf", "noext"}

// FuzzExtract feeds the dispatcher, and through it every extractor, with
// arbitrary bytes under any name: it must return a document of valid UTF-8
// text or an *Error, never panic (Extract turns a panic into ErrInternal),
// and never run into the time limit. Under
// go test it runs the seeds below (one document of each format, and
// damaged ones); `go test -fuzz FuzzExtract ./app/docs` explores.
func FuzzExtract(f *testing.F) {
	var xlsx bytes.Buffer
	wb := excelize.NewFile()
	_ = wb.SetCellValue("Sheet1", "A1", "鈴蘭")
	_ = wb.SetCellValue("Sheet1", "B2", 3)
	if err := wb.Write(&xlsx); err != nil {
		f.Fatal(err)
	}
	pdfData, err := readTestdataFile("table.pdf")
	if err != nil {
		f.Fatal(err)
	}
	seeds := map[string][]byte{
		"a.txt":  []byte("plain text\n"),
		"a.md":   []byte("# Title\n\n- item\n"),
		"a.go":   []byte("package main\n"),
		"a.csv":  []byte("a,b\n1,\"2\"\n"),
		"a.tsv":  []byte("a\tb\n1\t2\n"),
		"a.json": []byte(`{"a": [1, "鈴蘭"]}`),
		"a.html": []byte("<html><body><h1>T</h1><table><tr><td>x</td></tr></table><ul><li>y</li></ul><pre>z</pre></body></html>"),
		"a.pdf":  pdfData,
		"a.docx": docxOf(f, para("Heading1", 0, 0, "Title")+para("", 1, 0, "item")+`<w:tbl><w:tr>`+cell("c")+`</w:tr></w:tbl>`),
		"a.xlsx": xlsx.Bytes(),
		"a.epub": epubOf(f, "<h1>One</h1><p>text</p>"),
		"a.rtf":  []byte(`{\rtf1\ansi{\fonttbl{\f0\fcharset128 M;}}\f0 \'93\'fa\u37428?\par\trowd\pard\intbl a\cell b\cell\row}`),
		"noext":  []byte("#!/bin/sh\necho hi\n"),
	}
	for i, name := range fuzzNames {
		data := seeds[name]
		f.Add(uint8(i), data)
		f.Add(uint8(i), data[:len(data)/2]) // cut short
		if len(data) > 20 {
			flipped := bytes.Clone(data)
			flipped[len(flipped)/3] ^= 0xff
			f.Add(uint8(i), flipped)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		name := fuzzNames[int(which)%len(fuzzNames)]
		doc, err := Extract(context.Background(), name, data, Options{Limits: fuzzLimits})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Message == "" || e.Name != name {
				t.Fatalf("%s: error %v (%T) is not an *Error with a message", name, err, err)
			}
			if errors.Is(err, ErrInternal) {
				t.Fatalf("%s: %v", name, err)
			}
			if errors.Is(err, ErrTimeLimit) {
				t.Fatalf("%s: ran into the time limit on %d bytes", name, len(data))
			}
			return
		}
		if doc.Text == "" || !utf8.ValidString(doc.Text) {
			t.Fatalf("%s: text %q is empty or not UTF-8", name, doc.Text)
		}
	})
}
