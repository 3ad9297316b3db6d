package docs

import (
	"context"
	"strings"
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

// The user's choice of encoding (Options.Encoding) decides how a text
// file is decoded, whatever the detector would say; an unknown name is
// refused with the list to choose from.
func TestChosenEncoding(t *testing.T) {
	const russian = "Ландыш майский, 6120 цветков"
	koi8, err := charmap.KOI8R.NewEncoder().String(russian)
	if err != nil {
		t.Fatal(err)
	}
	sjis, err := japanese.ShiftJIS.NewEncoder().String("シフトJISの文章 camellia 6120")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data, encoding, want string
	}{
		{"notes.txt", koi8, "KOI8-R", russian},
		{"notes.txt", koi8, "koi8-r", russian},
		{"data.csv", "word\n" + koi8 + "\n", "KOI8-R", "| Ландыш майский | 6120 цветков |"},
		{"note.txt", sjis, "Shift_JIS", "シフトJISの文章 camellia 6120"},
		// Chosen wrong on purpose: what the user asked for is what they get.
		{"note.txt", sjis, "GB18030", "僔僼僩JIS偺暥復 camellia 6120"},
		{"bom.txt", "\xEF\xBB\xBFhello", "UTF-8", "hello"},
	} {
		doc, err := Extract(context.Background(), tc.name, []byte(tc.data), Options{Encoding: tc.encoding})
		if err != nil {
			t.Fatalf("%s as %s: %v", tc.name, tc.encoding, err)
		}
		if !strings.Contains(doc.Text, tc.want) || !strings.EqualFold(doc.Encoding, tc.encoding) {
			t.Errorf("%s as %s: encoding %q, text %q; want it to hold %q", tc.name, tc.encoding, doc.Encoding, doc.Text, tc.want)
		}
	}
	_, err = Extract(context.Background(), "notes.txt", []byte(koi8), Options{Encoding: "EBCDIC"})
	if err == nil || !strings.Contains(err.Error(), "choose one of UTF-8, Shift_JIS") {
		t.Errorf("unknown encoding: %v", err)
	}
}
