package docs

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

// zipOf writes a ZIP archive of the named parts, in the order given.
func zipOf(t testing.TB, parts ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, p := range parts {
		f, err := w.Create(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(p[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const wordNS = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"`

// docxOf builds a Word document whose body is the given WordprocessingML,
// with heading styles and two numbering definitions (1: bullets,
// 2: decimal), as Word writes them.
func docxOf(t testing.TB, body string) []byte {
	t.Helper()
	return zipOf(t,
		[2]string{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`},
		[2]string{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`},
		[2]string{"word/styles.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:styles ` + wordNS + `><w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style><w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style><w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/></w:style><w:style w:type="paragraph" w:styleId="Custom"><w:name w:val="Chapter"/><w:pPr><w:outlineLvl w:val="2"/></w:pPr></w:style></w:styles>`},
		[2]string{"word/numbering.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:numbering ` + wordNS + `><w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/></w:lvl><w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/></w:lvl></w:abstractNum><w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:numFmt w:val="decimal"/></w:lvl><w:lvl w:ilvl="1"><w:numFmt w:val="lowerLetter"/></w:lvl></w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num><w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num></w:numbering>`},
		[2]string{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document ` + wordNS + `><w:body>` + body + `<w:sectPr/></w:body></w:document>`},
	)
}

// para is a w:p with an optional style and a numbering (numID, level).
func para(style string, numID, level int, runs ...string) string {
	var b strings.Builder
	b.WriteString("<w:p>")
	if style != "" || numID != 0 {
		b.WriteString("<w:pPr>")
		if style != "" {
			b.WriteString(`<w:pStyle w:val="` + style + `"/>`)
		}
		if numID != 0 {
			b.WriteString(`<w:numPr><w:ilvl w:val="` + string(rune('0'+level)) + `"/><w:numId w:val="` + string(rune('0'+numID)) + `"/></w:numPr>`)
		}
		b.WriteString("</w:pPr>")
	}
	for _, r := range runs {
		b.WriteString(`<w:r><w:t xml:space="preserve">` + r + `</w:t></w:r>`)
	}
	b.WriteString("</w:p>")
	return b.String()
}

func cell(text string) string { return "<w:tc>" + para("", 0, 0, text) + "</w:tc>" }

func TestDOCX(t *testing.T) {
	body := para("Title", 0, 0, "Lily of the Valley") +
		para("", 0, 0, "An ", "introduction", " in two runs.") +
		para("Heading1", 0, 0, "Care") +
		para("", 1, 0, "Shade") +
		para("", 1, 1, "Moist soil") +
		para("", 1, 0, "Gloves") +
		para("Heading2", 0, 0, "Steps") +
		para("", 2, 0, "Dig") +
		para("", 2, 1, "Carefully") +
		para("", 2, 0, "Divide") +
		para("Custom", 0, 0, "Outline level three") +
		// A table with a merged header cell (gridSpan) and CJK text.
		`<w:tbl><w:tr><w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr>` + para("", 0, 0, "Plant") + `</w:tc>` + cell("Count") + `</w:tr>` +
		`<w:tr>` + cell("鈴蘭") + cell("白") + cell("120") + `</w:tr>` +
		`<w:tr>` + cell("Tulip | red") + `<w:tc>` + para("", 0, 0, "two") + para("", 0, 0, "lines") + `</w:tc>` + cell("45") + `</w:tr></w:tbl>` +
		// Tracked changes: the deletion is left out, the insertion kept;
		// field codes are left out, their result kept; a link keeps its text.
		`<w:p><w:r><w:t>Kept </w:t></w:r><w:del><w:r><w:delText>deleted </w:delText></w:r></w:del><w:ins><w:r><w:t>inserted</w:t></w:r></w:ins></w:p>` +
		`<w:p><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText>PAGE</w:instrText></w:r><w:r><w:t>7</w:t></w:r><w:hyperlink><w:r><w:t> see https://example.com</w:t></w:r></w:hyperlink></w:p>` +
		// A text box is written twice by Word: once for new readers
		// (mc:Choice), once as a fallback; it is read once.
		`<w:p><w:r><mc:AlternateContent><mc:Choice><w:txbxContent>` + para("", 0, 0, "Box text") + `</w:txbxContent></mc:Choice><mc:Fallback><w:txbxContent>` + para("", 0, 0, "Box text") + `</w:txbxContent></mc:Fallback></mc:AlternateContent></w:r></w:p>` +
		para("", 0, 0, "Tab<w:tab/>and<w:br/>break") +
		para("", 0, 0, "日本語の段落です。")
	// para escapes nothing: the tab and break above are elements.
	body = strings.Replace(body, "Tab<w:tab/>and<w:br/>break", "Tab</w:t></w:r><w:r><w:tab/><w:t>and</w:t><w:br/><w:t>break", 1)
	doc := mustExtract(t, "care.docx", docxOf(t, body))
	want := `# Lily of the Valley

An introduction in two runs.

# Care

- Shade
  - Moist soil
- Gloves

## Steps

1. Dig
  1. Carefully
2. Divide

### Outline level three

| Plant |  | Count |
| --- | --- | --- |
| 鈴蘭 | 白 | 120 |
| Tulip \| red | two<br>lines | 45 |

Kept inserted

7 see https://example.com

Box text

Tab	and
break

日本語の段落です。`
	if doc.Text != want {
		t.Errorf("text\n%s\nwant\n%s", doc.Text, want)
	}
	if doc.Format != FormatDOCX || doc.Type != "Word document" {
		t.Errorf("format %s (%s)", doc.Format, doc.Type)
	}
}

func TestXLSX(t *testing.T) {
	f := excelize.NewFile()
	defer f.Close()
	set := func(sheet, cell string, v any) {
		if err := f.SetCellValue(sheet, cell, v); err != nil {
			t.Fatal(err)
		}
	}
	set("Sheet1", "A1", "Item")
	set("Sheet1", "B1", "Count")
	set("Sheet1", "C1", "Price")
	set("Sheet1", "A2", "Lily | white")
	set("Sheet1", "B2", 120)
	set("Sheet1", "C2", 2.5)
	set("Sheet1", "A4", "鈴蘭")
	set("Sheet1", "B4", 7)
	if err := f.SetCellFormula("Sheet1", "C4", "B4*2"); err != nil {
		t.Fatal(err)
	}
	set("Sheet1", "C4", 14) // the cached value Excel would have stored
	if _, err := f.NewSheet("空"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.NewSheet("Hidden"); err != nil {
		t.Fatal(err)
	}
	set("Hidden", "A1", "secret")
	if err := f.SetSheetVisible("Hidden", false); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	doc := mustExtract(t, "stock.xlsx", buf.Bytes())
	want := `## Sheet: Sheet1

| Item | Count | Price |
| --- | --- | --- |
| Lily \| white | 120 | 2.5 |
| 鈴蘭 | 7 | 14 |

## Sheet: 空

(empty sheet)

## Sheet: Hidden (hidden)

| secret |
| --- |`
	if doc.Text != want {
		t.Errorf("text\n%s\nwant\n%s", doc.Text, want)
	}
	if doc.Pages != 3 || doc.PageUnit != "sheets" {
		t.Errorf("%d %s, want 3 sheets", doc.Pages, doc.PageUnit)
	}
	_, err := Extract(context.Background(), "stock.xlsx", buf.Bytes(), Options{Limits: Limits{MaxPages: 2}})
	if !errors.Is(err, ErrTooManyPages) || err.Error() != "stock.xlsx: has 3 sheets, over the limit of 2; attach a part of it (for a PDF, print the pages you need to a new PDF)" {
		t.Errorf("sheet limit: %v", err)
	}

	// A password-protected workbook, as Excel (and excelize) encrypt it.
	path := filepath.Join(t.TempDir(), "locked.xlsx")
	if err := f.SaveAs(path, excelize.Options{Password: "lily"}); err != nil {
		t.Fatal(err)
	}
	locked, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = extract(t, "locked.xlsx", locked)
	if !errors.Is(err, ErrEncrypted) || err.Error() != "locked.xlsx: is protected by a password (Office keeps such files encrypted); open it, remove the password, save it and attach that copy" {
		t.Errorf("encrypted: %v", err)
	}
}

// A sparse sheet, one value in the last column (XFD, the 16,384th) over
// 2,000 rows of one value, reads as a header of every column and rows of
// their own cells, not as a grid of 32 million.
func TestXLSXSparse(t *testing.T) {
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetCellValue("Sheet1", "XFD1", "x"); err != nil {
		t.Fatal(err)
	}
	for r := 2; r <= 2001; r++ {
		if err := f.SetCellValue("Sheet1", "A"+strconv.Itoa(r), "y"); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	doc := mustExtract(t, "sparse.xlsx", buf.Bytes())
	want := "## Sheet: Sheet1\n\n|" + strings.Repeat("  |", 16383) + " x |\n|" + strings.Repeat(" --- |", 16384) + strings.Repeat("\n| y |", 2000)
	if doc.Text != want {
		t.Errorf("text of %d bytes, want %d bytes; starts %.80q", len(doc.Text), len(want), doc.Text)
	}
}

// epubOf builds an EPUB 3 book with the given chapters (XHTML bodies).
func epubOf(t testing.TB, chapters ...string) []byte {
	t.Helper()
	parts := [][2]string{
		{"mimetype", "application/epub+zip"},
		{"META-INF/container.xml", `<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>`},
	}
	var manifest, spine strings.Builder
	for i, body := range chapters {
		id := "c" + strconv.Itoa(i+1)
		manifest.WriteString(`<item id="` + id + `" href="text/` + id + `.xhtml" media-type="application/xhtml+xml"/>`)
		spine.WriteString(`<itemref idref="` + id + `"/>`)
		parts = append(parts, [2]string{"OEBPS/text/" + id + ".xhtml", `<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>ignored</title><style>p{color:red}</style></head><body>` + body + `</body></html>`})
	}
	manifest.WriteString(`<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>`)
	spine.WriteString(`<itemref idref="nav" linear="no"/>`)
	parts = append(parts, [2]string{"OEBPS/content.opf", `<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>鈴蘭の本</dc:title><dc:creator>A. Gardener</dc:creator><dc:creator>B. Botanist</dc:creator></metadata><manifest>` + manifest.String() + `</manifest><spine>` + spine.String() + `</spine></package>`},
		[2]string{"OEBPS/nav.xhtml", `<html><body><nav>Table of contents</nav></body></html>`})
	return zipOf(t, parts...)
}

func TestEPUB(t *testing.T) {
	data := epubOf(t,
		`<h1>第一章</h1><p>鈴蘭は春に咲きます。</p>`,
		`<h1>Chapter Two</h1><p>Lilies &amp; bells.<script>alert(1)</script></p><table><tr><th>Plant</th><th>Height</th></tr><tr><td>Lily</td><td>20 cm</td></tr></table>`)
	doc := mustExtract(t, "book.epub", data)
	want := `# 鈴蘭の本

By A. Gardener, B. Botanist

# 第一章

鈴蘭は春に咲きます。

# Chapter Two

Lilies & bells.

| Plant | Height |
| --- | --- |
| Lily | 20 cm |`
	if doc.Text != want {
		t.Errorf("text\n%s\nwant\n%s", doc.Text, want)
	}
	if doc.Pages != 2 || doc.PageUnit != "chapters" || doc.Format != FormatEPUB {
		t.Errorf("%s: %d %s", doc.Format, doc.Pages, doc.PageUnit)
	}

	// DRM: encryption.xml lists a chapter.
	drm := zipOf(t,
		[2]string{"mimetype", "application/epub+zip"},
		[2]string{"META-INF/container.xml", `<container><rootfiles><rootfile full-path="content.opf"/></rootfiles></container>`},
		[2]string{"META-INF/encryption.xml", `<encryption xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData><enc:CipherReference URI="c1.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>`},
		[2]string{"content.opf", `<package><manifest><item id="c1" href="c1.xhtml"/></manifest><spine><itemref idref="c1"/></spine></package>`},
		[2]string{"c1.xhtml", "\x8f\x12 ciphertext"})
	_, err := extract(t, "drm.epub", drm)
	if !errors.Is(err, ErrEncrypted) || err.Error() != "drm.epub: is protected by DRM (its chapters are encrypted); only DRM-free books can be attached" {
		t.Errorf("DRM: %v", err)
	}
}

// Damaged ZIP-based documents: each reports what is wrong with it.
func TestOfficeDamaged(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		msg  string
	}{
		{"truncated.docx", docxOf(t, para("", 0, 0, "x"))[:300], "truncated.docx: is not a readable Word document (it is not a readable ZIP container: zip: not a valid zip file); open it in the program that made it, save a new copy and attach that"},
		{"nobody.docx", zipOf(t, [2]string{"[Content_Types].xml", "<Types/>"}), "nobody.docx: is not a readable Word document (it has no word/document.xml part); open it in the program that made it, save a new copy and attach that"},
		{"badxml.docx", zipOf(t, [2]string{"word/document.xml", `<w:document ` + wordNS + `><w:body><w:p><w:r><w:t>open`}), "badxml.docx: is not a readable document (part word/document.xml: XML syntax error on line 1: unexpected EOF); open it in the program that made it, save a new copy and attach that"},
		{"nosheets.xlsx", zipOf(t, [2]string{"[Content_Types].xml", "<Types/>"}), "nosheets.xlsx: is not a readable Excel workbook (its workbook could not be opened: EOF); open it in the program that made it, save a new copy and attach that"},
		{"nocontainer.epub", zipOf(t, [2]string{"mimetype", "application/epub+zip"}), "nocontainer.epub: is not a readable EPUB book (it has no META-INF/container.xml); open it in the program that made it, save a new copy and attach that"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := extract(t, c.name, c.data)
			if !errors.Is(err, ErrDamaged) || err.Error() != c.msg {
				t.Errorf("got %v\nwant %s", err, c.msg)
			}
		})
	}
}

// An XXE attack: a DOCTYPE that declares an external entity naming a file
// of this computer, used in the text. It is refused before any entity is
// looked at, and the file's content appears nowhere.
func TestDOCXExternalEntity(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE w:document [<!ENTITY xxe SYSTEM "file://` + secret + `">]>
<w:document ` + wordNS + `><w:body><w:p><w:r><w:t>&xxe;</w:t></w:r></w:p></w:body></w:document>`
	data := zipOf(t, [2]string{"word/document.xml", body})
	doc, err := extract(t, "xxe.docx", data)
	if doc != nil && strings.Contains(doc.Text, "TOP-SECRET") {
		t.Fatal("the external entity was read")
	}
	if !errors.Is(err, ErrUnsafe) || err.Error() != "xxe.docx: part word/document.xml declares XML entities (a DOCTYPE), which Office and EPUB writers never do and which can be used to read files from this computer; it was not read" {
		t.Errorf("got %v", err)
	}
	// The billion-laughs form (internal entities only) is refused alike.
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><w:document ` + wordNS + `><w:body><w:p><w:r><w:t>&lol2;</w:t></w:r></w:p></w:body></w:document>`
	if _, err := extract(t, "lol.docx", zipOf(t, [2]string{"word/document.xml", laughs})); !errors.Is(err, ErrUnsafe) {
		t.Errorf("billion laughs: %v", err)
	}
}

// Zip bombs: one part that honestly declares a huge size, over the limit;
// and one whose directory lies (declares 1 KB, unpacks to 32 MB), which
// archive/zip stops at the declared size.
func TestZipBomb(t *testing.T) {
	zeros := bytes.Repeat([]byte{0}, 32<<20)
	var compressed bytes.Buffer
	fw, err := flate.NewWriter(&compressed, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(zeros); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	bomb := func(part string, declared uint64) []byte {
		var buf bytes.Buffer
		w := zip.NewWriter(&buf)
		f, err := w.CreateRaw(&zip.FileHeader{
			Name: part, Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(zeros),
			CompressedSize64: uint64(compressed.Len()), UncompressedSize64: declared,
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(compressed.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	parts := map[string]string{"bomb.docx": "word/document.xml", "bomb.xlsx": "xl/worksheets/sheet1.xml", "bomb.epub": "OEBPS/c1.xhtml"}
	for _, name := range []string{"bomb.docx", "bomb.xlsx", "bomb.epub"} {
		honest := bomb(parts[name], uint64(len(zeros)))
		t.Logf("%s: %d bytes unpack to %d", name, len(honest), len(zeros))
		_, err := Extract(context.Background(), name, honest, Options{Limits: Limits{MaxUnpackedBytes: 10 << 20}})
		what := map[string]string{"bomb.docx": "Word document", "bomb.xlsx": "Excel workbook", "bomb.epub": "EPUB book"}[name]
		want := name + ": would unpack to more than 10.5 MB (the limit for a " + what + "); it may be a decompression bomb, and was not read"
		if !errors.Is(err, ErrUnpackLimit) || err.Error() != want {
			t.Errorf("got %v\nwant %s", err, want)
		}
	}
	_, err = extract(t, "liar.docx", bomb("word/document.xml", 1024))
	if !errors.Is(err, ErrDamaged) || err.Error() != "liar.docx: is not a readable Word document (part word/document.xml: zip: not a valid zip file); open it in the program that made it, save a new copy and attach that" {
		t.Errorf("lying directory: %v", err)
	}
	// Too many parts.
	var many [][2]string
	for i := range 50 {
		many = append(many, [2]string{"p" + strings.Repeat("x", i), ""})
	}
	_, err = Extract(context.Background(), "many.docx", zipOf(t, many...), Options{Limits: Limits{MaxZipEntries: 40}})
	if !errors.Is(err, ErrUnpackLimit) || err.Error() != "many.docx: holds 50 parts, over the limit of 40 for a Word document; it may be a decompression bomb, and was not read" {
		t.Errorf("entries: %v", err)
	}
}
