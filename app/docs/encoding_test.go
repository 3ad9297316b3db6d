package docs

import (
	"testing"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// Short texts give the ICU detector too little to go on (a Shift_JIS line
// of 30 bytes once read as GB18030: "僔僼僩JIS偺暥復"); each legacy encoding
// is detected from a short line and from a paragraph, by how the decoding
// reads as the encoding's script.
func TestLegacyEncodingDetection(t *testing.T) {
	cases := []struct {
		name string
		enc  encoding.Encoding
		text string
	}{
		{"Shift_JIS", japanese.ShiftJIS, "シフトJISの文章 camellia 6120"},
		{"Shift_JIS", japanese.ShiftJIS, "すずらん"},
		{"Shift_JIS", japanese.ShiftJIS, japanese1},
		{"EUC-JP", japanese.EUCJP, "ＥＵＣの文章です"},
		{"EUC-JP", japanese.EUCJP, "日本語のメモ"},
		{"EUC-JP", japanese.EUCJP, japanese1},
		{"GB18030", simplifiedchinese.GB18030, "简体中文文本"},
		{"GB18030", simplifiedchinese.GB18030, "会议记录 2024"},
		{"GB18030", simplifiedchinese.GB18030, chinese1},
		{"Big5", traditionalchinese.Big5, "繁體中文文本"},
		{"Big5", traditionalchinese.Big5, "會議記錄 2024"},
		{"Big5", traditionalchinese.Big5, "鈴蘭在春天開出白色的小花。它的花朵像小鈴鐺，香氣非常好聞，但是全株有毒。"},
		{"EUC-KR", korean.EUCKR, "한국어 문장"},
		{"EUC-KR", korean.EUCKR, "회의록 2024"},
		{"EUC-KR", korean.EUCKR, "은방울꽃은 봄에 하얀 꽃을 피웁니다. 작은 종 모양의 꽃은 향기가 아주 좋습니다."},
		{"Windows-1251", charmap.Windows1251, "Ландыш"},
		{"Windows-1251", charmap.Windows1251, "Привет, мир"},
		{"Windows-1251", charmap.Windows1251, "Ландыш майский цветёт весной белыми колокольчиками с сильным ароматом."},
		{"Windows-1252", charmap.Windows1252, "Grüße aus München"},
		{"Windows-1252", charmap.Windows1252, "« Le muguet fleurit en mai », dit-elle — c’est déjà l’été."},
	}
	for _, c := range cases {
		data := encode(t, c.enc, c.text)
		enc, name := detectEncoding(data)
		if name != c.name {
			t.Errorf("%q in %s: detected as %s", c.text, c.name, name)
			continue
		}
		if got, err := enc.NewDecoder().String(string(data)); err != nil || got != c.text {
			t.Errorf("%q in %s: decoded as %q (%v)", c.text, c.name, got, err)
		}
	}
}
