package docs

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
)

func TestHTML(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		text string
	}{
		{"page.html", []byte(`<!DOCTYPE html>
<html><head><title>Tab title</title><style>body { color: red }</style>
<script>document.write("no")</script><meta charset="utf-8"></head>
<body>
<nav><a href="https://example.com/home">Home</a></nav>
<h1>Lilies   of the
 valley</h1>
<p>Grows in <b>shade</b>, flowers in <i>May</i>.<br>Poisonous.</p>
<noscript>Enable JavaScript</noscript>
<ul><li>White</li><li>Scented<ol><li>first</li><li>second</li></ol></li></ul>
<table><thead><tr><th>Plant</th><th>Height</th></tr></thead>
<tbody><tr><td>Lily | bell</td><td>20 cm</td></tr><tr><td><p>two</p><p>paragraphs</p></td><td></td></tr></tbody></table>
<pre>  indented
    code &lt;here&gt;</pre>
<p>鈴蘭は<span>春に</span>咲きます。 <img src="x.png" alt="a lily"></p>
<template><p>hidden</p></template><svg><text>vector</text></svg>
</body></html>`),
			"Home\n\n# Lilies of the valley\n\nGrows in shade, flowers in May.\nPoisonous.\n\n- White\n- Scented\n  1. first\n  2. second\n\n" +
				"| Plant | Height |\n| --- | --- |\n| Lily \\| bell | 20 cm |\n| two<br>paragraphs |  |\n\n" +
				"```\n  indented\n    code <here>\n```\n\n鈴蘭は春に咲きます。 [image: a lily]"},
		// The encoding from <meta charset>, and from the detector when
		// there is none.
		{"sjis.html", append([]byte(`<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"></head><body><p>`), append(encode(t, japanese.ShiftJIS, japanese1), "</p></body></html>"...)...), japanese1},
		{"latin.htm", append([]byte("<p>"), encode(t, charmap.Windows1252, "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, na\u00efve fa\u00e7ade, \u201cquoted\u201d.</p>")...), "Café crème brûlée, naïve façade, “quoted”."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := mustExtract(t, c.name, c.data)
			if doc.Text != c.text {
				t.Errorf("text\n%q\nwant\n%q", doc.Text, c.text)
			}
		})
	}
}

// Deep nesting costs linear time and no stack: the tokenizer streams and
// list indentation stops growing at maxIndent.
func TestHTMLDeeplyNested(t *testing.T) {
	const depth = 200000
	page := strings.Repeat("<div>", depth) + "deep" + strings.Repeat("</div>", depth) +
		strings.Repeat("<ul><li>", depth/10) + "item" + strings.Repeat("</li></ul>", depth/10) +
		strings.Repeat("<table><tr><td>", 1000) + "cell" + strings.Repeat("</td></tr></table>", 1000)
	start := time.Now()
	doc := mustExtract(t, "deep.html", []byte(page))
	// Each table holds the one below it: 1000 nested one-cell tables, each
	// cell's table written into its parent's cell.
	if !strings.HasPrefix(doc.Text, "deep\n\n"+strings.Repeat("  ", maxIndent)+"- item") || !strings.Contains(doc.Text, "cell") {
		t.Errorf("text %.200q", doc.Text)
	}
	// Measured at 0.6 s on the development machine; 20 s leaves room for
	// a loaded one while a quadratic walk (minutes) still fails.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

// A table inside a table cell is written as the cell's text: Markdown has
// no nested tables.
func TestNestedTables(t *testing.T) {
	html := mustExtract(t, "nested.html", []byte("<table><tr><td>outer</td><td><table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table></td></tr></table>"))
	if want := "| outer | a b<br>c |\n| --- | --- |"; html.Text != want {
		t.Errorf("HTML:\n%s\nwant\n%s", html.Text, want)
	}
	inner := "<w:tbl><w:tr>" + cell("a") + cell("b") + "</w:tr><w:tr>" + cell("c") + "</w:tr></w:tbl>"
	docx := mustExtract(t, "nested.docx", docxOf(t, "<w:tbl><w:tr>"+cell("outer")+"<w:tc>"+inner+"</w:tc></w:tr></w:tbl>"))
	if want := "| outer | a b<br>c |\n| --- | --- |"; docx.Text != want {
		t.Errorf("DOCX:\n%s\nwant\n%s", docx.Text, want)
	}
}
