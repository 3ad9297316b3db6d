package docs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRTF(t *testing.T) {
	cases := []struct {
		name string
		rtf  string
		text string
	}{
		{"wordpad.rtf", `{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fnil\fcharset0 Calibri;}}
{\colortbl ;\red255\green0\blue0;}
{\*\generator Riched20 10.0.19041}\viewkind4\uc1
\pard\sa200\sl276\slmult1\b\f0\fs28 Lily of the Valley\b0\fs22\par
Caf\'e9 cr\'e8me \endash  na\'efve \ldblquote quoted\rdblquote .\par
Tab\tab after\line next line\par
{\*\bkmkstart x}Escaped \{braces\} and a backslash \\.\par
{\pict\wmetafile8\picw100 0100090000035000000000}
}`, "Lily of the Valley\nCafé crème – naïve “quoted”.\nTab\tafter\nnext line\nEscaped {braces} and a backslash \\."},
		// Unicode with \uN and its fallback, a surrogate pair, a negative
		// \uN (values over 32767 are written as negative 16-bit numbers).
		{"unicode.rtf", `{\rtf1\ansi\uc1 \u37428?\u-31187?\u12398?\u-10179?\u-8704? done\par}`, "鈴蘭の😀 done"},
		// Japanese from older Word: Shift_JIS bytes in a font whose charset
		// is 128, with \uc0 (no fallback characters).
		{"sjis.rtf", `{\rtf1\ansi\ansicpg932\deff0{\fonttbl{\f0\fnil\fcharset128 MS Mincho;}{\f1\fswiss Arial;}}` +
			`\f0 \'97\'e9\'97\'96\'82\'cd\'8f\'74\'82\'c9\'8d\'e7\'82\'ab\'82\'dc\'82\'b7\'81\'42\par` +
			`\f1 Arial text\par}`, "鈴蘭は春に咲きます。\nArial text"},
		// Chinese: GBK bytes under \ansicpg936.
		{"gbk.rtf", `{\rtf1\ansi\ansicpg936{\fonttbl{\f0\fnil\fcharset134 SimSun;}}\f0 \'c1\'e5\'c0\'bc\par}`, "铃兰"},
		{"table.rtf", `{\rtf1\ansi
Before the table.\par
\trowd\cellx1000\cellx2000\cellx3000
\pard\intbl Item\cell Colour\cell Count\cell\row
\trowd\cellx1000\cellx2000\cellx3000
\pard\intbl Lily | bell\cell White\cell 120\cell\row
\pard After the table.\par}`, "Before the table.\n\n| Item | Colour | Count |\n| --- | --- | --- |\n| Lily \\| bell | White | 120 |\n\nAfter the table."},
		// Field instructions are dropped, their results kept; binary data
		// is skipped by its length.
		{"fields.rtf", `{\rtf1{\field{\*\fldinst HYPERLINK "https://example.com"}{\fldrslt the link}} and \bin4 {}\}x after}`, "the link and x after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := mustExtract(t, c.name, []byte(c.rtf))
			if doc.Text != c.text {
				t.Errorf("text\n%q\nwant\n%q", doc.Text, c.text)
			}
			if doc.Format != FormatRTF {
				t.Errorf("format %s", doc.Format)
			}
		})
	}
}

func TestRTFDamaged(t *testing.T) {
	_, err := extract(t, "cut.rtf", []byte(`{\rtf1\ansi {\b bold text`))
	if !errors.Is(err, ErrDamaged) || err.Error() != "cut.rtf: is not a readable RTF document (it ends inside 2 unclosed groups; it may have been cut short); open it in the program that made it, save a new copy and attach that" {
		t.Errorf("got %v", err)
	}
	// Nested groups cost memory in proportion, never stack; 10,000 deep
	// are read, a million refused (each open group keeps its state, so
	// that 100 MB of "{" would take gigabytes).
	nested := func(n int) []byte {
		return []byte(`{\rtf1 ` + strings.Repeat("{", n) + "deep" + strings.Repeat("}", n) + "}")
	}
	start := time.Now()
	doc := mustExtract(t, "deep.rtf", nested(maxRTFDepth-1))
	if doc.Text != "deep" {
		t.Errorf("deep: %q", doc.Text)
	}
	_, err = extract(t, "deeper.rtf", nested(1000000))
	if !errors.Is(err, ErrDamaged) || err.Error() != "deeper.rtf: is not a readable RTF document (it nests groups more than 10,000 deep; no real document does); open it in the program that made it, save a new copy and attach that" {
		t.Errorf("a million groups deep: %v", err)
	}
	// Measured at well under a second; 20 s still fails a quadratic walk.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("deep: took %v", d)
	}
}
