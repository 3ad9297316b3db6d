package docs

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
	"github.com/suzuran-app/suzuran/engine/machine"
	"github.com/suzuran-app/suzuran/engine/machine/childrss"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// Document bombs: small files made to expand into gigabytes of text. Each
// is written at test time and extracted, with the default limits, in a
// child process (this test binary again) whose peak RSS the kernel
// measures (engine/machine/childrss); the bound holds for the whole child, the Go runtime
// and the tokenizer included.
//
// maxBombRSS is that bound. The text of a document is at most
// DefaultMaxChars characters, 16 MB for these ASCII texts; a few copies
// of it as it is built, the heap's growth before the collector runs, and
// the runtime's own ~20 MB stay well under it (measured: 43 to 85 MB).
// Without the limits each of these files passed 1 GB within seconds, and
// such files were seen to take 6 to 12 GB: the child stops itself at
// childRSSCeiling, so that a failing run cannot take the machine's memory.
const (
	maxBombRSS      = 256 << 20
	childRSSCeiling = 1 << 30
	bombEnv         = "SUZURAN_DOCS_BOMB"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(bombEnv); path != "" {
		os.Exit(extractInChild(path))
	}
	os.Exit(m.Run())
}

// bombResult is what the child reports on stdout.
type bombResult struct {
	// PeakRSS is the child's own peak resident size, in bytes.
	PeakRSS   int64    `json:"peak_rss"`
	Error     string   `json:"error,omitempty"`
	TextLimit bool     `json:"text_limit,omitempty"`
	Chars     int      `json:"chars,omitempty"`
	Tokens    int      `json:"tokens,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

// extractInChild extracts the file at path as the app does (extraction,
// then counting its tokens) and prints a bombResult.
func extractInChild(path string) int {
	childrss.Guard(childRSSCeiling)
	var r bombResult
	doc, err := ExtractFile(context.Background(), path, Options{})
	if err == nil {
		var tok *tokenizer.Tokenizer
		if tok, err = tokenizer.Load(filepath.Join("..", "..", "assets", "models", "suzuran-tiny")); err != nil {
			fmt.Println(err)
			return 2
		}
		var att Attachment
		att, err = NewAttachment(context.Background(), doc, tok, nil)
		r.Chars, r.Tokens, r.Notes = len([]rune(doc.Text)), att.Tokens, doc.Notes
	}
	if err != nil {
		r.Error, r.TextLimit = err.Error(), errors.Is(err, ErrTextLimit)
	}
	r.PeakRSS = machine.PeakRSS()
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

var (
	bombChildOnce sync.Once
	bombChildBin  string
	bombChildErr  error
)

// bombChild is the program the children run: this test binary; under the
// race detector, which slows the child tenfold and doubles its memory (its
// shadow memory, not the extraction's), the same tests built without it.
func bombChild(t *testing.T) string {
	if !raceEnabled {
		return os.Args[0]
	}
	bombChildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "docs-bomb-child")
		if err != nil {
			bombChildErr = err
			return
		}
		bombChildBin = filepath.Join(dir, "docs.test")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		cmd := exec.Command(goTool, "test", "-c", "-o", bombChildBin, ".")
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			bombChildErr = fmt.Errorf("building the child without -race: %v\n%s", err, out)
		}
	})
	if bombChildErr != nil {
		t.Fatal(bombChildErr)
	}
	return bombChildBin
}

// runBomb extracts path in a child process and returns its result and
// peak RSS.
func runBomb(t *testing.T, path string) (bombResult, int64) {
	t.Helper()
	stdout := childrss.Run(t, bombChild(t), bombEnv+"="+path)
	var r bombResult
	if err := json.Unmarshal(stdout, &r); err != nil || r.PeakRSS <= 0 {
		t.Fatalf("child said %q: %v", stdout, err)
	}
	return r, r.PeakRSS
}

// deflated is a ZIP part whose content is head, unit repeated to size
// bytes, and tail, compressed.
type deflated struct {
	name       string
	head, tail string
	unit       string
	size       int
}

// flush compresses s into deflate blocks that need nothing before them
// and end on a byte, so that such pieces join into one stream; the last
// piece closes it.
func flush(t *testing.T, s string, last bool) []byte {
	t.Helper()
	var b bytes.Buffer
	fw, err := flate.NewWriter(&b, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(fw, s)
	if last {
		err = fw.Close()
	} else {
		err = fw.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// stream returns the part's deflate stream and the CRC-32, Adler-32 and
// length of its content. A chunk of about 1 MB is compressed once and its
// blocks repeated, so that hundreds of megabytes take milliseconds to
// make (and as long under the race detector).
func (d deflated) stream(t *testing.T, withAdler bool) (data []byte, crc, adler uint32, size int) {
	t.Helper()
	chunk := strings.Repeat(d.unit, max(1, min(d.size, 1<<20)/len(d.unit)))
	n := max(1, d.size/len(chunk))
	if d.size <= 0 {
		chunk, n = d.unit, 1
	}
	c := flush(t, chunk, false)
	data = append(data, flush(t, d.head, false)...)
	crcH, adlerH := crc32.NewIEEE(), adler32.New()
	w := io.Writer(crcH)
	if withAdler { // pure Go, slow under the race detector: only for PDFs
		w = io.MultiWriter(crcH, adlerH)
	}
	io.WriteString(w, d.head)
	for range n {
		data = append(data, c...)
		io.WriteString(w, chunk)
	}
	data = append(data, flush(t, d.tail, true)...)
	io.WriteString(w, d.tail)
	return data, crcH.Sum32(), adlerH.Sum32(), len(d.head) + n*len(chunk) + len(d.tail)
}

// zipBomb writes a ZIP of small parts and deflated ones.
func zipBomb(t *testing.T, small [][2]string, big ...deflated) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, p := range small {
		f, err := w.Create(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(f, p[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range big {
		data, crc, _, size := d.stream(t, false)
		f, err := w.CreateRaw(&zip.FileHeader{Name: d.name, Method: zip.Deflate, CRC32: crc,
			CompressedSize64: uint64(len(data)), UncompressedSize64: uint64(size)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func epubBomb(t *testing.T, spine string, chapter deflated) []byte {
	return zipBomb(t, [][2]string{
		{"mimetype", "application/epub+zip"},
		{"META-INF/container.xml", `<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>`},
		{"OEBPS/content.opf", `<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Bomb</dc:title></metadata><manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/><item id="c2" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest><spine>` + spine + `</spine></package>`},
	}, chapter)
}

// pdfBomb writes a one-page PDF whose content stream is unit repeated to
// size bytes (once when size is 0) between head and tail,
// FlateDecode-compressed.
func pdfBomb(t *testing.T, head, unit, tail string, size int) []byte {
	t.Helper()
	raw, _, sum, _ := deflated{head: head, unit: unit, tail: tail, size: size}.stream(t, true)
	var content bytes.Buffer
	content.Write([]byte{0x78, 0xda}) // zlib: deflate, best compression
	content.Write(raw)
	binary.Write(&content, binary.BigEndian, sum)
	var b bytes.Buffer
	var offsets []int
	obj := func(body string) {
		offsets = append(offsets, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offsets), body)
	}
	b.WriteString("%PDF-1.4\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>")
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	obj(fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", content.Len(), content.Bytes()))
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, xref)
	return b.Bytes()
}

const lily = "<p>Lilies of the valley flower in late spring, white and small.</p>\n"

// bombXLSXParts are a workbook's parts but for its shared strings; its
// sheet has 10,000 rows of 20 cells, all the one shared string.
func bombXLSXParts() [][2]string {
	var sheet strings.Builder
	sheet.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>`)
	for r := 1; r <= 10000; r++ { // 200,000 cells, all the one shared string
		fmt.Fprintf(&sheet, `<row r="%d">`, r)
		for c := 0; c < 20; c++ {
			fmt.Fprintf(&sheet, `<c r="%c%d" t="s"><v>0</v></c>`, 'A'+c, r)
		}
		sheet.WriteString(`</row>`)
	}
	sheet.WriteString(`</sheetData></worksheet>`)
	return [][2]string{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`},
		{"xl/workbook.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>`},
		{"xl/_rels/workbook.xml.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`},
		{"xl/worksheets/sheet1.xml", sheet.String()},
	}
}

// bombDOCXParts are a document's parts but for word/document.xml, which
// starts with bombDOCXHead and ends with bombDOCXTail.
var bombDOCXParts = [][2]string{
	{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`},
}

const (
	bombDOCXHead = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document ` + wordNS + `><w:body>`
	bombDOCXTail = `</w:body></w:document>`
)

// documentBomb is a file made to expand, and what extracting it must give:
// either the document is read, to chars characters at most, with a note;
// or it is refused with err.
type documentBomb struct {
	name  string
	data  func(t *testing.T) []byte
	chars int
	note  string
	err   string
	kind  error // of err: ErrTextLimit when nil
}

var documentBombs = []documentBomb{{
	// One 4 MB chapter listed 2,000 times (under two ids): read once,
	// so its text is shorter than the chapter (8 GB if read 2,000 times).
	name: "repeated-chapter.epub",
	data: func(t *testing.T) []byte {
		return epubBomb(t, strings.Repeat(`<itemref idref="c1"/><itemref idref="c2"/>`, 1000),
			deflated{name: "OEBPS/c1.xhtml", head: "<html><body>", tail: "</body></html>", unit: lily, size: 4 << 20})
	},
	chars: 4 << 20,
	note:  "the book lists chapters it has already listed 1999 more times; each chapter was read once",
}, {
	// One chapter of 256 MB of text.
	name: "long-chapter.epub",
	data: func(t *testing.T) []byte {
		return epubBomb(t, `<itemref idref="c1"/>`,
			deflated{name: "OEBPS/c1.xhtml", head: "<html><body>", tail: "</body></html>", unit: lily, size: 256 << 20})
	},
	err: "long-chapter.epub: has more than 16,000,000 characters of text, the limit for one document (far more than the model can read at once); attach the part you need",
}, {
	// One shared string of 64 KB in 200,000 cells: 13 GB of text.
	name: "shared-string.xlsx",
	data: func(t *testing.T) []byte {
		return zipBomb(t, bombXLSXParts(), deflated{
			name: "xl/sharedStrings.xml",
			head: `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="200000" uniqueCount="1"><si><t>`,
			tail: `</t></si></sst>`, unit: "lily ", size: 64 << 10,
		})
	},
	err: "shared-string.xlsx: has more than 16,000,000 characters of text, the limit for one document (far more than the model can read at once); attach the part you need",
}, {
	// 480 MB of paragraphs.
	name: "paragraphs.docx",
	data: func(t *testing.T) []byte {
		return zipBomb(t, bombDOCXParts, deflated{name: "word/document.xml", head: bombDOCXHead, tail: bombDOCXTail,
			unit: "<w:p><w:r><w:t>Lilies of the valley flower in late spring.</w:t></w:r></w:p>", size: 480 << 20})
	},
	err: "paragraphs.docx: has more than 16,000,000 characters of text, the limit for one document (far more than the model can read at once); attach the part you need",
}, {
	// 256 MB of text in one run, which the XML decoder would hold whole.
	name: "one-run.docx",
	data: func(t *testing.T) []byte {
		return zipBomb(t, bombDOCXParts, deflated{name: "word/document.xml", head: bombDOCXHead + "<w:p><w:r><w:t>", tail: "</w:t></w:r></w:p>" + bombDOCXTail,
			unit: "lily ", size: 256 << 20})
	},
	err: "one-run.docx: has more than 16,000,000 characters of text, the limit for one document (far more than the model can read at once); attach the part you need",
}, {
	// 256 MB in one tag's attribute.
	name: "one-tag.docx",
	data: func(t *testing.T) []byte {
		return zipBomb(t, bombDOCXParts, deflated{name: "word/document.xml", head: bombDOCXHead + `<w:p w:lily="`, tail: `"/>` + bombDOCXTail,
			unit: "lily ", size: 256 << 20})
	},
	err: "one-tag.docx: has a single piece of text or markup longer than 16.8 MB in its part word/document.xml; no real document does, and it was not read",
}, {
	// An EPUB chapter of one 256 MB tag.
	name: "one-tag.epub",
	data: func(t *testing.T) []byte {
		return epubBomb(t, `<itemref idref="c1"/>`,
			deflated{name: "OEBPS/c1.xhtml", head: `<html><body><p title="`, tail: `">lily</p></body></html>`, unit: "lily ", size: 256 << 20})
	},
	err: "one-tag.epub: has a single piece of text or markup longer than 16.8 MB; no real document does, and it was not read",
}, {
	// 256 MB of paragraphs, each opened inside the one before.
	name: "nested.docx",
	data: func(t *testing.T) []byte {
		return zipBomb(t, bombDOCXParts, deflated{name: "word/document.xml", head: bombDOCXHead, tail: bombDOCXTail, unit: "<w:p>", size: 256 << 20})
	},
	kind: ErrDamaged,
	err:  "nested.docx: is not a readable document (part word/document.xml nests elements more than 1,000 deep; no real document does); open it in the program that made it, save a new copy and attach that",
}, {
	// A chapter of 128 MB of tables, each opened in a cell of the one
	// before (and a word in the innermost): read as one table's text.
	name: "nested-tables.epub",
	data: func(t *testing.T) []byte {
		return epubBomb(t, `<itemref idref="c1"/>`,
			deflated{name: "OEBPS/c1.xhtml", head: "<html><body>", tail: "lily</body></html>", unit: "<table><tr><td>", size: 128 << 20})
	},
	chars: 100,
	note:  "",
}, {
	// 64 MB of groups opened in one another.
	name: "groups.rtf",
	data: func(t *testing.T) []byte { return []byte(`{\rtf1 ` + strings.Repeat("{", 64<<20)) },
	kind: ErrDamaged,
	err:  "groups.rtf: is not a readable RTF document (it nests groups more than 10,000 deep; no real document does); open it in the program that made it, save a new copy and attach that",
}, {
	// 15 MB of commas: one record of 15 million fields.
	name: "commas.csv",
	data: func(t *testing.T) []byte { return []byte(strings.Repeat(",", 15<<20) + "x\n") },
	err:  "commas.csv: is a table of more than 4,000,000 cells, which written out is over the limit of 16,000,000 characters of text for one document; attach the part you need",
}, {
	// A rich-text shared string of 230,000 characters in one row of
	// 16,384 cells: excelize would build the row's values, 3.8 GB,
	// before any could be counted.
	name: "rich-row.xlsx",
	data: func(t *testing.T) []byte {
		var row strings.Builder
		row.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">`)
		for c := 0; c < 16384; c++ {
			row.WriteString(`<c t="s"><v>0</v></c>`)
		}
		row.WriteString(`</row></sheetData></worksheet>`)
		parts := append([][2]string{}, bombXLSXParts()[:4]...)
		parts = append(parts, [2]string{"xl/worksheets/sheet1.xml", row.String()})
		return zipBomb(t, parts, deflated{
			name: "xl/sharedStrings.xml",
			head: `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="1" uniqueCount="1"><si>`,
			tail: `</si></sst>`, unit: "<r><t>lily</t></r>", size: 1 << 20,
		})
	},
	err: "rich-row.xlsx: has more than 16,000,000 characters of text, the limit for one document (far more than the model can read at once); attach the part you need",
}, {
	// A page that shows 256 MB of text: the library would keep every
	// character of it (64 bytes each) before the layout.
	name: "page-text.pdf",
	data: func(t *testing.T) []byte {
		return pdfBomb(t, "BT /F1 12 Tf 72 720 Td ", "(Lilies of the valley) Tj ", " ET", 256<<20)
	},
	err: "page-text.pdf: has more than 524 KB of text on page 1, far more than any printed page; it may be made to fill memory, and was not read",
}, {
	// A page of 256 MB of numbers without an operator: the library
	// would hold them all on its stack.
	name: "operands.pdf",
	data: func(t *testing.T) []byte { return pdfBomb(t, "", "1 ", " m", 256<<20) },
	kind: ErrDamaged,
	err:  "operands.pdf: is not a readable PDF document (page 1 gives an operator more than 65,536 values; no real PDF does); open it in the program that made it, save a new copy and attach that",
}}

func TestDocumentBombs(t *testing.T) {
	for _, tc := range documentBombs {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.data(t)
			path := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			r, rss := runBomb(t, path)
			t.Logf("%s: %s file, peak RSS %d MB; %d characters, %d tokens; error %q", tc.name, bytesize.Format(int64(len(data))), rss>>20, r.Chars, r.Tokens, r.Error)
			if rss > maxBombRSS {
				t.Errorf("peak RSS %d MB, over the %d MB bound", rss>>20, maxBombRSS>>20)
			}
			if tc.err != "" {
				if r.TextLimit != (tc.kind == nil) || r.Error != tc.err {
					t.Errorf("got error %q (text limit: %v)\nwant %q", r.Error, r.TextLimit, tc.err)
				}
				return
			}
			if r.Error != "" || r.Chars == 0 || r.Chars > tc.chars || !strings.Contains(strings.Join(r.Notes, "\n"), tc.note) {
				t.Errorf("got %d characters, notes %q, error %q; want at most %d characters and the note %q", r.Chars, r.Notes, r.Error, tc.chars, tc.note)
			}
		})
	}
}

// The text limits themselves, small: characters as the text is read,
// tokens as they are counted, each with a message naming the limit.
func TestTextLimit(t *testing.T) {
	text := strings.Repeat("lily ", 300) // 1,500 characters
	_, err := Extract(context.Background(), "lilies.txt", []byte(text), Options{Limits: Limits{MaxChars: 1000}})
	if !errors.Is(err, ErrTextLimit) || err.Error() != "lilies.txt: has more than 1,000 characters of text, the limit for one document (far more than the model can read at once); attach the part you need" {
		t.Errorf("characters: %v", err)
	}
	doc, err := Extract(context.Background(), "lilies.txt", []byte(text), Options{Limits: Limits{MaxChars: 1500, MaxTokens: 100}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewAttachment(context.Background(), doc, demoTok(t), nil)
	if !errors.Is(err, ErrTextLimit) || err.Error() != "lilies.txt: has more than 100 tokens of text, the limit for one document (far more than the model can read at once); attach the part you need" {
		t.Errorf("tokens: %v", err)
	}
	// Every format counts: the same text as a table, a page, a book.
	for name, data := range map[string][]byte{
		"lilies.csv":  []byte(strings.Repeat("lily,white\n", 150)),
		"lilies.html": []byte("<p>" + text + "</p>"),
		"lilies.docx": docxOf(t, para("", 0, 0, text)),
		"lilies.epub": epubOf(t, "<p>"+text+"</p>"),
		"lilies.rtf":  []byte(`{\rtf1 ` + text + `}`),
	} {
		_, err := Extract(context.Background(), name, data, Options{Limits: Limits{MaxChars: 1000}})
		if !errors.Is(err, ErrTextLimit) || !strings.HasPrefix(err.Error(), name+": has more than 1,000 characters of text") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The page scan counts what a page shows as the library reads it (hex
// strings half their digits, escapes and nested parentheses in literal
// strings): a page of 400 KB of text is read whole, one of 530 KB is
// refused, both by the 512 KB bound.
func TestPDFPageScan(t *testing.T) {
	data := pdfBomb(t, "", "BT /F1 12 Tf 72 720 Td <4C696C 696573> Tj ( of \\(the\\) (valley)) Tj ET", "", 0)
	doc, err := Extract(context.Background(), "lilies.pdf", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "--- Page 1 ---\nLilies of (the) (valley)"; doc.Text != want {
		t.Errorf("text %q, want %q", doc.Text, want)
	}
	line := "(" + strings.Repeat("lily ", 20) + ") Tj 0 -14 Td\n" // 100 bytes of text
	for _, tc := range []struct {
		lines int
		ok    bool
	}{{4000, true}, {5300, false}} {
		data := pdfBomb(t, "BT /F1 12 Tf 72 720 Td\n", strings.Repeat(line, tc.lines), "ET", 0)
		doc, err := Extract(context.Background(), "dense.pdf", data, Options{})
		if tc.ok && (err != nil || strings.Count(doc.Text, "lily") != 20*tc.lines) {
			t.Errorf("%d lines: %v", tc.lines, err)
		}
		if !tc.ok && !errors.Is(err, ErrTextLimit) {
			t.Errorf("%d lines: %v; want the page's text bound", tc.lines, err)
		}
	}
}
