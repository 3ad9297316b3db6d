package docs

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// extract runs Extract with default options on a document held in memory.
func extract(t *testing.T, name string, data []byte) (*Document, error) {
	t.Helper()
	return Extract(context.Background(), name, data, Options{})
}

// mustExtract extracts and fails the test on an error.
func mustExtract(t *testing.T, name string, data []byte) *Document {
	t.Helper()
	doc, err := extract(t, name, data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return doc
}

// encode writes s in a legacy encoding.
func encode(t testing.TB, enc encoding.Encoding, s string) []byte {
	t.Helper()
	b, err := enc.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatalf("encoding %q: %v", s, err)
	}
	return b
}

// The CJK sentences used across formats: Japanese and Chinese prose long
// enough for the encoding detector to be sure of the language.
const (
	japanese1 = "鈴蘭は春に白い花を咲かせます。すずらんの花は小さな鐘の形をしていて、とても良い香りがします。"
	chinese1  = "铃兰在春天开出白色的小花。它的花朵像小铃铛，香气非常好闻，但是全株有毒。"
)

func TestTextEncodings(t *testing.T) {
	english := "Café déjà vu: naïve façade — “quoted” €5.\n"
	cases := []struct {
		name     string
		data     []byte
		text     string
		encoding string
	}{
		{"utf8.txt", []byte("plain ASCII and ユニコード\n"), "plain ASCII and ユニコード\n", "UTF-8"},
		{"bom.txt", append([]byte{0xEF, 0xBB, 0xBF}, "with a BOM 鈴蘭"...), "with a BOM 鈴蘭", "UTF-8"},
		{"utf16le.txt", encode(t, unicode.UTF16(unicode.LittleEndian, unicode.UseBOM), japanese1), japanese1, "UTF-16LE"},
		{"utf16be.txt", encode(t, unicode.UTF16(unicode.BigEndian, unicode.UseBOM), chinese1), chinese1, "UTF-16BE"},
		{"utf32le.txt", encode(t, utf32.UTF32(utf32.LittleEndian, utf32.UseBOM), "UTF-32 鈴蘭"), "UTF-32 鈴蘭", "UTF-32LE"},
		{"utf32be.txt", encode(t, utf32.UTF32(utf32.BigEndian, utf32.UseBOM), "UTF-32 鈴蘭"), "UTF-32 鈴蘭", "UTF-32BE"},
		{"sjis.txt", encode(t, japanese.ShiftJIS, japanese1), japanese1, "Shift_JIS"},
		{"gb18030.txt", encode(t, simplifiedchinese.GB18030, chinese1), chinese1, "GB18030"},
		{"cp1252.txt", encode(t, charmap.Windows1252, english), english, "Windows-1252"},
		{"crlf.txt", []byte("one\r\ntwo\rthree\n"), "one\ntwo\nthree\n", "UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := mustExtract(t, c.name, c.data)
			if doc.Text != c.text {
				t.Errorf("text %q, want %q", doc.Text, c.text)
			}
			if doc.Encoding != c.encoding {
				t.Errorf("encoding %q, want %q", doc.Encoding, c.encoding)
			}
			if doc.Format != FormatText {
				t.Errorf("format %q, want text", doc.Format)
			}
		})
	}
}

// Bytes the detector finds equally likely in several encodings decode the
// same way every time (its guesses of equal confidence once came in a
// different order from run to run).
func TestEncodingDetectionIsStable(t *testing.T) {
	for _, sample := range [][]byte{[]byte("\xff\xfe0000"), []byte("<\x93<i><\x93")} {
		_, first := detectEncoding(sample)
		for range 30 {
			if _, name := detectEncoding(sample); name != first {
				t.Fatalf("%q: detected as %s, then as %s", sample, first, name)
			}
		}
	}
}

func TestTextFormats(t *testing.T) {
	cases := []struct {
		name   string
		data   string
		format Format
		text   string
	}{
		{"notes.md", "# Title\n\n- item 鈴蘭\n", FormatMarkdown, "# Title\n\n- item 鈴蘭\n"},
		{"main.go", "package main\n\nfunc main() {}\n", FormatCode, "```go\npackage main\n\nfunc main() {}\n```"},
		{"tool", "#!/usr/bin/env python3\nprint('鈴蘭')\n", FormatCode, "```python\n#!/usr/bin/env python3\nprint('鈴蘭')\n```"},
		{"run", "#!/bin/bash\necho hi\n", FormatCode, "```bash\n#!/bin/bash\necho hi\n```"},
		{"Makefile", "all:\n\tgo build\n", FormatCode, "```make\nall:\n\tgo build\n```"},
		{"snippet", "package lily\n\nfunc Bloom() {}\n", FormatCode, "```go\npackage lily\n\nfunc Bloom() {}\n```"},
		// A fence inside the code gets a longer fence around it.
		{"README.rb", "x = <<~MD\n```\nMD\n", FormatCode, "````ruby\nx = <<~MD\n```\nMD\n````"},
		{"data.json", `{"name": "鈴蘭", "n": [1, 2]}`, FormatJSON, "```json\n{\"name\": \"鈴蘭\", \"n\": [1, 2]}\n```"},
		{"noext", `{"a": 1}`, FormatJSON, "```json\n{\"a\": 1}\n```"},
		{"page", "<!DOCTYPE html><html><body><p>Sniffed</p></body></html>", FormatHTML, "Sniffed"},
		{"plain", "just some words\n", FormatText, "just some words\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := mustExtract(t, c.name, []byte(c.data))
			if doc.Format != c.format {
				t.Errorf("format %q, want %q", doc.Format, c.format)
			}
			if doc.Text != c.text {
				t.Errorf("text\n%q\nwant\n%q", doc.Text, c.text)
			}
		})
	}
}

// A sparse table (one row of 3,000 columns over 3,000 rows of one cell)
// keeps each row to its own cells instead of padding a 3,000 × 3,000 grid:
// 9 KB of CSV once made 27 MB of text.
func TestCSVSparse(t *testing.T) {
	data := strings.Repeat(",", 3000) + "x\n" + strings.Repeat("y\n", 3000)
	doc := mustExtract(t, "sparse.csv", []byte(data))
	want := "|" + strings.Repeat("  |", 3000) + " x |\n|" + strings.Repeat(" --- |", 3001) + strings.Repeat("\n| y |", 3000)
	if doc.Text != want {
		t.Errorf("text of %d bytes, want %d bytes; starts %.80q", len(doc.Text), len(want), doc.Text)
	}
}

func TestCSV(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		text string
	}{
		{"stock.csv", []byte("Item,Colour,Count\nLily of the valley,White,120\n\"Tulip, red\",Red,45\n鈴蘭,白,7\n"),
			"| Item | Colour | Count |\n| --- | --- | --- |\n| Lily of the valley | White | 120 |\n| Tulip, red | Red | 45 |\n| 鈴蘭 | 白 | 7 |"},
		{"ragged.csv", []byte("a,b\n1\n2,3,4\n"),
			"| a | b |  |\n| --- | --- | --- |\n| 1 |  |  |\n| 2 | 3 | 4 |"},
		{"pipes.csv", []byte("cmd,note\n\"a|b\",\"two\nlines\"\n"),
			"| cmd | note |\n| --- | --- |\n| a\\|b | two<br>lines |"},
		// A bare quote in an unquoted field is a character ("5" screen).
		{"inches.csv", []byte("size,item\n5\" screen,phone\n"),
			"| size | item |\n| --- | --- |\n| 5\" screen | phone |"},
		{"stock.tsv", []byte("Item\tCount\nLily\t120\n"), "| Item | Count |\n| --- | --- |\n| Lily | 120 |"},
		// Excel's "Unicode text" export: tab-separated UTF-16 named .csv.
		{"excel.csv", encode(t, unicode.UTF16(unicode.LittleEndian, unicode.UseBOM), "名前\t数\r\n鈴蘭\t3\r\n"),
			"| 名前 | 数 |\n| --- | --- |\n| 鈴蘭 | 3 |"},
		{"sjis.csv", encode(t, japanese.ShiftJIS, "品名,色,数量\n鈴蘭,白,百二十\nチューリップ,赤,四十五\nアヤメ,青,七\n"),
			"| 品名 | 色 | 数量 |\n| --- | --- | --- |\n| 鈴蘭 | 白 | 百二十 |\n| チューリップ | 赤 | 四十五 |\n| アヤメ | 青 | 七 |"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := mustExtract(t, c.name, c.data)
			if doc.Text != c.text {
				t.Errorf("text\n%s\nwant\n%s", doc.Text, c.text)
			}
		})
	}
}

// Each error names the file and says what to do; the kind is testable with
// errors.Is.
func TestExtractErrors(t *testing.T) {
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
		kind error
		msg  string
	}{
		{"empty.txt", nil, ErrEmpty, "empty.txt: is empty (0 bytes): there is nothing to attach"},
		{"blank.md", []byte(" \n\n\t\n"), ErrEmpty, "blank.md: holds no text (it is a Markdown document with nothing written in it)"},
		{"photo.png", pngData.Bytes(), ErrUnsupported, "photo.png: is a PNG image (image/png); images can't be attached yet, only text documents (text, Markdown, code, CSV, JSON, HTML, PDF, DOCX, XLSX, EPUB, RTF)"},
		{"photo.txt", pngData.Bytes(), ErrUnsupported, "photo.txt: is a PNG image (image/png); images can't be attached yet, only text documents (text, Markdown, code, CSV, JSON, HTML, PDF, DOCX, XLSX, EPUB, RTF)"},
		{"archive.gz", []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x00\x00"), ErrUnsupported, "archive.gz: is a gzip archive, which can't be attached; attach a text document instead (text, Markdown, code, CSV, JSON, HTML, PDF, DOCX, XLSX, EPUB, RTF)"},
		{"slides.pptx", zipOf(t, [2]string{"[Content_Types].xml", "<Types/>"}, [2]string{"ppt/presentation.xml", "<p/>"}), ErrUnsupported, "slides.pptx: is a PowerPoint presentation (.pptx), which can't be attached; export it as PDF and attach that"},
		{"blob.bin", []byte{0x00, 0x01, 0x02, 0x03, 0xff}, ErrUnsupported, "blob.bin: is a binary file of unknown type, which can't be attached; attach a text document instead (text, Markdown, code, CSV, JSON, HTML, PDF, DOCX, XLSX, EPUB, RTF)"},
		{"broken.json", []byte("{\n  \"a\": 1,\n  \"b\": ]\n}"), ErrDamaged, "broken.json: is not valid JSON: line 3, column 8: invalid character ']' looking for beginning of value; fix it, or rename the file to .txt to attach it as plain text"},
		{"broken.csv", []byte("a,b\n\"open,1\n"), ErrDamaged, "broken.csv: is not a readable table: line 2, column 9: extraneous or missing \" in quoted-field; fix the quoting there, or rename the file to .txt to attach it as plain text"},
		{"report.pdf", []byte("this is not a PDF at all"), ErrDamaged, "report.pdf: is not a readable PDF document (it is plain text, not a PDF document); open it in the program that made it, save a new copy and attach that"},
		{"report.docx", []byte("this is not a Word file"), ErrDamaged, "report.docx: is not a readable Word document (it is plain text, not a Word document); open it in the program that made it, save a new copy and attach that"},
		{"sheet.xlsx", []byte{0, 1, 2, 3}, ErrDamaged, "sheet.xlsx: is not a readable Excel workbook (its content is a binary file of unknown type); open it in the program that made it, save a new copy and attach that"},
		{"book.epub", []byte("PK\x03\x04 cut short"), ErrDamaged, "book.epub: is not a readable EPUB book (it is not a readable ZIP container: zip: not a valid zip file); open it in the program that made it, save a new copy and attach that"},
		{"letter.rtf", []byte("plain words"), ErrDamaged, "letter.rtf: is not a readable RTF document (it is plain text, not a RTF document); open it in the program that made it, save a new copy and attach that"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := extract(t, c.name, c.data)
			if !errors.Is(err, c.kind) {
				t.Fatalf("error %v, want kind %v", err, c.kind)
			}
			if err.Error() != c.msg {
				t.Errorf("message\n%s\nwant\n%s", err, c.msg)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	t.Run("bytes", func(t *testing.T) {
		_, err := Extract(ctx, "big.txt", bytes.Repeat([]byte("a"), 2001), Options{Limits: Limits{MaxBytes: 2000}})
		if !errors.Is(err, ErrTooLarge) || err.Error() != "big.txt: is 2.00 KB, over the 2.00 KB limit for a document; attach a smaller part of it" {
			t.Errorf("got %v", err)
		}
		path := filepath.Join(t.TempDir(), "big.txt")
		if err := os.WriteFile(path, bytes.Repeat([]byte("a"), 5000), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = ExtractFile(ctx, path, Options{Limits: Limits{MaxBytes: 4096}})
		if !errors.Is(err, ErrTooLarge) || err.Error() != "big.txt: is 5.00 KB, over the 4.10 KB limit for a document; attach a smaller part of it" {
			t.Errorf("file: got %v", err)
		}
	})
	t.Run("pages", func(t *testing.T) {
		data := readTestdata(t, "table.pdf")
		_, err := Extract(ctx, "table.pdf", data, Options{Limits: Limits{MaxPages: 1}})
		if !errors.Is(err, ErrTooManyPages) || err.Error() != "table.pdf: has 2 pages, over the limit of 1; attach a part of it (for a PDF, print the pages you need to a new PDF)" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("time", func(t *testing.T) {
		// 40 MB of Windows-1252 text decodes for far longer than 1 ms.
		data := bytes.Repeat([]byte("caf\xe9 "), 8<<20)
		start := time.Now()
		_, err := Extract(ctx, "slow.txt", data, Options{Limits: Limits{Timeout: time.Millisecond}})
		if !errors.Is(err, ErrTimeLimit) || err.Error() != "slow.txt: took longer than the 1ms limit for reading a document and was stopped; attach a smaller part of it" {
			t.Errorf("got %v", err)
		}
		// Extract returns when the limit passes, not when the parser
		// notices; 2 s is far beyond scheduling noise on a busy machine.
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("returned after %v", d)
		}
	})
}

// A 50 MB text file: progress is reported as it is read and decoded, and
// cancelling from the progress callback stops it with context.Canceled.
// Its 50 million characters are over the default MaxChars, which is off
// here (TestTextLimit tests it).
func TestLargeFileProgressAndCancel(t *testing.T) {
	noTextLimit := Limits{MaxChars: -1}
	line := "Lilies of the valley flower in late spring; caf\xe9 \xab42\xbb.\n" // Windows-1252
	data := bytes.Repeat([]byte(line), 50<<20/len(line)+1)
	path := filepath.Join(t.TempDir(), "big.txt")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var reading, decoding atomic.Int64
	var lastDone atomic.Int64
	doc, err := ExtractFile(context.Background(), path, Options{Limits: noTextLimit, Progress: func(p Progress) {
		switch p.Stage {
		case "reading":
			reading.Add(1)
		case "extracting":
			decoding.Add(1)
			lastDone.Store(p.Done)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Size != int64(len(data)) || doc.Encoding != "Windows-1252" || !strings.HasPrefix(doc.Text, "Lilies of the valley flower in late spring; café «42».\n") {
		t.Errorf("size %d encoding %s text %.60q", doc.Size, doc.Encoding, doc.Text)
	}
	// One report per megabyte read and decoded, and the last at the end.
	if reading.Load() < 50 || decoding.Load() < 50 || lastDone.Load() != int64(len(data)) {
		t.Errorf("progress: %d reading, %d decoding reports, last at %d of %d", reading.Load(), decoding.Load(), lastDone.Load(), len(data))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int64
	_, err = ExtractFile(ctx, path, Options{Limits: noTextLimit, Progress: func(p Progress) {
		if p.Stage == "extracting" && calls.Add(1) == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || err.Error() != "big.txt: extraction cancelled" {
		t.Errorf("cancel: got %v", err)
	}
}

func TestDocumentIdentity(t *testing.T) {
	doc := mustExtract(t, "dir/notes.txt", []byte("abc"))
	// sha256("abc")
	if doc.Name != "notes.txt" || doc.Size != 3 || doc.SHA256 != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("got name %q size %d sha %s", doc.Name, doc.Size, doc.SHA256)
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := readTestdataFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readTestdataFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", name))
}
