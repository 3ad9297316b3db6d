// Command cjkpdf writes cjk.pdf, the test PDF of Japanese and Chinese
// text: two pages of prose and a page of two columns, set in a TrueType
// font that holds CJK glyphs, which the PDF embeds as a subset with
// two-byte codes (Identity-H) and a ToUnicode map, as office programs do.
package main

import (
	"flag"
	"log"

	"github.com/signintech/gopdf"
)

func main() {
	font := flag.String("font", "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf", "a TrueType font with CJK glyphs")
	out := flag.String("o", "cjk.pdf", "output file")
	flag.Parse()

	pdf := gopdf.GoPdf{}
	pdf.Start(gopdf.Config{PageSize: gopdf.Rect{W: 420, H: 300}})
	if err := pdf.AddTTFFont("cjk", *font); err != nil {
		log.Fatal(err)
	}
	text := func(x, y, size float64, s string) {
		if err := pdf.SetFont("cjk", "", size); err != nil {
			log.Fatal(err)
		}
		pdf.SetXY(x, y)
		if err := pdf.Cell(nil, s); err != nil {
			log.Fatal(err)
		}
	}
	pages := [][]string{
		{"鈴蘭（すずらん）", "鈴蘭は春に白い花を咲かせます。", "花は小さな鐘の形をしています。"},
		{"铃兰", "铃兰在春天开出白色的小花。", "全株有毒，请勿食用。"},
	}
	for _, lines := range pages {
		pdf.AddPage()
		for i, line := range lines {
			size := 12.0
			if i == 0 {
				size = 18
			}
			text(40, 50+float64(i)*30, size, line)
		}
	}
	// Page 3: a title over two columns, each line its own text run.
	pdf.AddPage()
	text(150, 40, 16, "二段組みの頁")
	columns := []struct {
		x     float64
		lines []string
	}{
		{30, []string{"左の段の一行目です。", "左の段の二行目です。", "左の段の三行目です。", "左の段の四行目です。"}},
		{220, []string{"右の段の一行目です。", "右の段の二行目です。", "右の段の三行目です。", "右の段の四行目です。"}},
	}
	for _, c := range columns {
		for i, line := range c.lines {
			text(c.x, 80+float64(i)*20, 11, line)
		}
	}
	if err := pdf.WritePdf(*out); err != nil {
		log.Fatal(err)
	}
}
