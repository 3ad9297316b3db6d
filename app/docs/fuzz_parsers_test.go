package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// One fuzz test per parser entry point: each calls its format's extractor
// directly, past the format detection, so that every input the fuzzer
// makes reaches that parser (through Extract most damaged PDFs or ZIPs
// would be refused by detection first). FuzzExtract, beside them, covers
// the dispatcher. Under `go test` each runs its seeds: the test documents
// of that format's tests, each also cut short and with a byte flipped.
// `make fuzz-docs` runs each for 60 s.

// fuzzLimits keep one input cheap: the fuzzer's inputs are at most a few
// hundred kilobytes, the largest seed (cjk.pdf, 48 KB) reads in about
// 30 ms, and a parser that needs 3 s for one has a super-linear path worth
// knowing about. A short limit also lets the fuzzer report a hang, and
// minimise it, well within its 60 s.
var fuzzLimits = Limits{MaxBytes: 4 << 20, MaxPages: 50, Timeout: 3 * time.Second, MaxUnpackedBytes: 16 << 20, MaxZipEntries: 200}

// hangGrace is how long past the time limit a parser may take to notice
// it: it checks its context every few thousand tokens or every page, so
// it should stop within milliseconds; 2 s covers a loaded two-core machine.
const hangGrace = 2 * time.Second

// maxGrowth bounds the text of a format that is not compressed: at most
// this many bytes of text per byte of the file (plus a little for fences
// and headings). The largest honest growth is a byte that becomes U+FFFD
// or a Windows-1252 character of three bytes, or a one-letter cell that
// becomes "| a " with its row's pipes; 16 leaves room, while the padding
// of a sparse table grows with the square of the input and fails it.
const maxGrowth = 16

// fuzzParser runs parse on data as the document called name, under
// fuzzLimits, and fails on a panic, on a parser that runs past the time
// limit (it does not check its context), on an error that is not an
// *Error naming the file with a message, on running into the time limit,
// on text that is not UTF-8, and, where growth is not 0, on text longer
// than growth bytes per byte of data (plus 4 KB). An empty text is
// allowed: Extract turns it into ErrEmpty.
func fuzzParser(t *testing.T, name string, data []byte, growth int, parse func(x *extraction) (string, error)) {
	limits := fuzzLimits.withDefaults()
	ctx, cancel := context.WithTimeoutCause(context.Background(), limits.Timeout, ErrTimeLimit)
	defer cancel()
	x := &extraction{ctx: ctx, name: name, data: data, limits: limits}
	type result struct {
		text  string
		err   error
		panic string
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{panic: fmt.Sprintf("%v\n%s", r, debug.Stack())}
			}
		}()
		text, err := parse(x)
		done <- result{text: text, err: err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(limits.Timeout + hangGrace):
		t.Fatalf("%s: the parser still runs %v after the %v time limit on %d bytes: it does not check its context", name, hangGrace, limits.Timeout, len(data))
	}
	if r.panic != "" {
		t.Fatalf("%s: panic on %d bytes: %s", name, len(data), r.panic)
	}
	if r.err != nil {
		var e *Error
		switch {
		case !errors.As(r.err, &e) || e.Message == "" || e.Name != name:
			t.Fatalf("%s: error %v (%T) is not an *Error naming the file with a message", name, r.err, r.err)
		case errors.Is(r.err, ErrTimeLimit):
			t.Fatalf("%s: ran into the %v time limit on %d bytes", name, limits.Timeout, len(data))
		}
		return
	}
	if !utf8.ValidString(r.text) {
		t.Fatalf("%s: text %q is not UTF-8", name, r.text)
	}
	if growth > 0 && len(r.text) > growth*len(data)+4096 {
		t.Fatalf("%s: %d bytes made %d bytes of text, over %d per byte", name, len(data), len(r.text), growth)
	}
}

// addSeeds adds each document, and each cut in half and with a byte
// flipped a third of the way in: damaged copies that reach deeper into
// the error paths than random mutations of a whole file would at first.
func addSeeds(f *testing.F, docs ...[]byte) {
	for _, data := range docs {
		f.Add(data)
		f.Add(data[:len(data)/2])
		if len(data) > 20 {
			flipped := bytes.Clone(data)
			flipped[len(flipped)/3] ^= 0xff
			f.Add(flipped)
		}
	}
}

// FuzzText: encoding detection and decoding (BOMs, UTF-8, the legacy
// encodings the detector guesses), the path of every text format.
func FuzzText(f *testing.F) {
	addSeeds(f,
		[]byte("plain ASCII and ユニコード\n"),
		append([]byte{0xEF, 0xBB, 0xBF}, "with a BOM 鈴蘭"...),
		encode(f, unicode.UTF16(unicode.LittleEndian, unicode.UseBOM), japanese1),
		encode(f, unicode.UTF16(unicode.BigEndian, unicode.UseBOM), chinese1),
		encode(f, utf32.UTF32(utf32.LittleEndian, utf32.UseBOM), "UTF-32 鈴蘭"),
		encode(f, utf32.UTF32(utf32.BigEndian, utf32.UseBOM), "UTF-32 鈴蘭"),
		encode(f, japanese.ShiftJIS, japanese1),
		encode(f, japanese.EUCJP, japanese1),
		encode(f, simplifiedchinese.GB18030, chinese1),
		encode(f, traditionalchinese.Big5, "鈴蘭在春天開出白色的小花。"),
		encode(f, korean.EUCKR, "은방울꽃은 봄에 하얀 꽃을 피웁니다."),
		encode(f, charmap.Windows1252, "Café déjà vu: naïve façade — “quoted” €5.\n"),
		[]byte("one\r\ntwo\rthree\n"),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParser(t, "a.txt", data, maxGrowth, func(x *extraction) (string, error) {
			text, _, err := x.decodeText(x.data)
			return text, err
		})
	})
}

// FuzzCSV: CSV and TSV tables (tabs picks the separator the name would).
func FuzzCSV(f *testing.F) {
	for _, doc := range [][]byte{
		[]byte("Item,Colour,Count\nLily of the valley,White,120\n\"Tulip, red\",Red,45\n鈴蘭,白,7\n"),
		[]byte("a,b\n1\n2,3,4\n"),
		[]byte("cmd,note\n\"a|b\",\"two\nlines\"\n"),
		[]byte("size,item\n5\" screen,phone\n"),
		[]byte("a,\"never closed\nb,c\n"),
		encode(f, unicode.UTF16(unicode.LittleEndian, unicode.UseBOM), "名前\t数\r\n鈴蘭\t3\r\n"),
		encode(f, japanese.ShiftJIS, "品名,色,数量\n鈴蘭,白,百二十\nチューリップ,赤,四十五\n"),
	} {
		f.Add(false, doc)
		f.Add(false, doc[:len(doc)/2])
	}
	f.Add(true, []byte("Item\tCount\nLily\t120\n"))
	f.Fuzz(func(t *testing.T, tabs bool, data []byte) {
		name := map[bool]string{false: "a.csv", true: "a.tsv"}[tabs]
		fuzzParser(t, name, data, maxGrowth, func(x *extraction) (string, error) {
			text, _, err := x.csv(tabs)
			return text, err
		})
	})
}

// FuzzJSON: JSON validation with line and column of a fault.
func FuzzJSON(f *testing.F) {
	addSeeds(f,
		[]byte(`{"name": "鈴蘭", "n": [1, 2], "nested": {"a": [true, false, null, 1e10, "\u00e9\ud83d\ude00"]}}`),
		[]byte("[1,\n 2,\n 3"),
		[]byte(`{"a": 1} {"b": 2}`),
		encode(f, unicode.UTF16(unicode.LittleEndian, unicode.UseBOM), `{"名前": "鈴蘭"}`),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParser(t, "a.json", data, maxGrowth, func(x *extraction) (string, error) {
			text, _, err := x.json()
			return text, err
		})
	})
}

// FuzzHTML: the encoding of a page (BOM, <meta charset>, detection) and
// its readable text.
func FuzzHTML(f *testing.F) {
	addSeeds(f,
		[]byte(`<!DOCTYPE html><html><head><title>T</title><style>p{}</style><script>x()</script><meta charset="utf-8"></head>
<body><nav><a href="https://example.com">Home</a></nav><h1>Lilies</h1><p>Grows in <b>shade</b>.<br>Poisonous.</p>
<ul><li>White</li><li>Scented<ol><li>first</li></ol></li></ul><table><tr><th>Plant</th></tr><tr><td><table><tr><td>inner</td></tr></table></td></tr></table>
<pre>  code &lt;here&gt;</pre><p>鈴蘭は春に咲きます。 <img src="x.png" alt="a lily"></p><template><p>hidden</p></template></body></html>`),
		append([]byte(`<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"></head><body><p>`), append(encode(f, japanese.ShiftJIS, japanese1), "</p></body></html>"...)...),
		append([]byte("<p>"), encode(f, charmap.Windows1252, "Café crème, “quoted”.</p>")...),
		[]byte("<div><div><ul><li><ul><li><table><tr><td>deep"),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParser(t, "a.html", data, maxGrowth, func(x *extraction) (string, error) {
			text, _, err := x.html()
			return text, err
		})
	})
}

// FuzzPDF: the PDF reader and the reading-order layout, seeded with the
// test PDFs (a table over two pages, two columns, CJK with two-byte
// codes, a scan without text).
func FuzzPDF(f *testing.F) {
	for _, name := range []string{"table.pdf", "two-column.pdf", "cjk.pdf", "scanned.pdf"} {
		data, err := readTestdataFile(name)
		if err != nil {
			f.Fatal(err)
		}
		addSeeds(f, data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParser(t, "a.pdf", data, 0, func(x *extraction) (string, error) {
			text, _, err := x.pdf()
			return text, err
		})
	})
}

// FuzzDOCX: the Word reader (relationships, styles, numbering, the
// document part), seeded with documents like TestDOCX's.
func FuzzDOCX(f *testing.F) {
	addSeeds(f,
		docxOf(f, para("Title", 0, 0, "Lily of the Valley")+para("Heading1", 0, 0, "Care")+para("", 1, 0, "Shade")+
			para("", 1, 1, "Moist soil")+para("", 2, 0, "Dig")+para("Custom", 0, 0, "Outline")+
			`<w:tbl><w:tr><w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr>`+para("", 0, 0, "Plant")+`</w:tc>`+cell("Count")+`</w:tr>`+
			`<w:tr>`+cell("鈴蘭")+cell("白")+cell("120")+`</w:tr></w:tbl>`+
			`<w:p><w:r><w:t>Kept </w:t></w:r><w:del><w:r><w:delText>deleted </w:delText></w:r></w:del><w:ins><w:r><w:t>inserted</w:t></w:r></w:ins></w:p>`+
			`<w:p><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText>PAGE</w:instrText></w:r><w:r><w:t>7</w:t></w:r></w:p>`+
			`<w:p><w:r><mc:AlternateContent><mc:Choice><w:txbxContent>`+para("", 0, 0, "Box")+`</w:txbxContent></mc:Choice><mc:Fallback><w:txbxContent>`+para("", 0, 0, "Box")+`</w:txbxContent></mc:Fallback></mc:AlternateContent></w:r></w:p>`),
		docxOf(f, para("", 0, 0, "日本語の段落です。")),
		zipOf(f, [2]string{"word/document.xml", `<!DOCTYPE w:document [<!ENTITY x "y">]><w:document ` + wordNS + `><w:body><w:p><w:r><w:t>&x;</w:t></w:r></w:p></w:body></w:document>`}),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParser(t, "a.docx", data, 0, func(x *extraction) (string, error) { return x.docx() })
	})
}

// FuzzXLSX: the workbook reader (excelize under the ZIP checks), seeded
// with workbooks like TestXLSX's.
func FuzzXLSX(f *testing.F) {
	wb := excelize.NewFile()
	for cell, v := range map[string]any{"A1": "Item", "B1": "Count", "A2": "Lily | white", "B2": 120, "C2": 2.5, "A4": "鈴蘭"} {
		if err := wb.SetCellValue("Sheet1", cell, v); err != nil {
			f.Fatal(err)
		}
	}
	if err := wb.SetCellFormula("Sheet1", "C4", "B2*2"); err != nil {
		f.Fatal(err)
	}
	if _, err := wb.NewSheet("空"); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := wb.Write(&buf); err != nil {
		f.Fatal(err)
	}
	addSeeds(f, buf.Bytes(), zipOf(f, [2]string{"[Content_Types].xml", "<Types/>"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParser(t, "a.xlsx", data, 0, func(x *extraction) (string, error) {
			text, _, err := x.xlsx()
			return text, err
		})
	})
}

// FuzzEPUB: container, package document, encryption list and chapters.
func FuzzEPUB(f *testing.F) {
	addSeeds(f,
		epubOf(f, `<h1>第一章</h1><p>鈴蘭は春に咲きます。</p>`,
			`<h1>Chapter Two</h1><p>Lilies &amp; bells.<script>alert(1)</script></p><table><tr><th>Plant</th></tr><tr><td>Lily</td></tr></table>`),
		zipOf(f,
			[2]string{"mimetype", "application/epub+zip"},
			[2]string{"META-INF/container.xml", `<container><rootfiles><rootfile full-path="content.opf"/></rootfiles></container>`},
			[2]string{"META-INF/encryption.xml", `<encryption><EncryptedData><CipherData><CipherReference URI="c1.xhtml"/></CipherData></EncryptedData></encryption>`},
			[2]string{"content.opf", `<package><manifest><item id="c1" href="c1.xhtml"/></manifest><spine><itemref idref="c1"/></spine></package>`},
			[2]string{"c1.xhtml", "\x8f\x12 ciphertext"}),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParser(t, "a.epub", data, 0, func(x *extraction) (string, error) {
			text, _, err := x.epub()
			return text, err
		})
	})
}

// FuzzRTF: the RTF tokenizer (groups, destinations, \uN, code pages,
// tables, \bin), seeded with TestRTF's documents.
func FuzzRTF(f *testing.F) {
	addSeeds(f,
		[]byte(`{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fnil\fcharset0 Calibri;}}{\colortbl ;\red255\green0\blue0;}{\*\generator Riched20}\viewkind4\uc1
\pard\sa200\b\f0\fs28 Lily\b0\par Caf\'e9 \endash  \ldblquote q\rdblquote .\par Tab\tab after\line next\par Escaped \{b\} \\.\par{\pict\wmetafile8 0100}}`),
		[]byte(`{\rtf1\ansi\uc1 \u37428?\u-31187?\u12398?\u-10179?\u-8704? done\par}`),
		[]byte(`{\rtf1\ansi\ansicpg932{\fonttbl{\f0\fnil\fcharset128 MS Mincho;}{\f1 Arial;}}\f0 \'97\'e9\'97\'96\'82\'cd\par\f1 Arial\par}`),
		[]byte(`{\rtf1\ansi\ansicpg936{\fonttbl{\f0\fnil\fcharset134 SimSun;}}\f0 \'c1\'e5\'c0\'bc\par}`),
		[]byte(`{\rtf1\ansi Before.\par\trowd\cellx1000\cellx2000\pard\intbl Item\cell Count\cell\row\trowd\cellx1000\cellx2000\pard\intbl Lily | bell\cell 120\cell\row\pard After.\par}`),
		[]byte(`{\rtf1{\field{\*\fldinst HYPERLINK "https://example.com"}{\fldrslt the link}} and \bin4 {}\}x after}`),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParser(t, "a.rtf", data, maxGrowth, func(x *extraction) (string, error) { return x.rtf() })
	})
}
