package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// benchDocument builds a deterministic document of exactly n characters
// that looks like what a user pastes into a chat: English prose with many
// distinct (partly invented) words, Go-like code, Japanese and Chinese,
// numbers and dates, some Cyrillic and Greek, emoji, and CRLF paragraphs.
// Invented words keep the word cache from doing all the work.
func benchDocument(n int) string {
	r := rand.New(rand.NewPCG(2026, 11))
	common := strings.Fields("the of and to in is that it for was on are as with his they at be this from have or by one had not but what all were when we there can an your which their said if do will each about how up out them then she many some so these would other into has more her two like him see time could no make than first been its who now people my made over did down only way find use may water long little very after words called just where most know")
	syllables := strings.Fields("ka ri to mo na shi ve lo qu ent ion ar st pr ex tra ble ous ism ize ph th gr bl")
	cjk := []string{"日本語の文章を書きます。", "東京は大きな都市です。", "我们今天去公园散步。", "机器学习模型", "ローカルで動かす", "テキストを分割する、", "中文测试：数据与算法。"}
	other := []string{"Привет, мир!", "Καλημέρα κόσμε", "naïve café coöperate", "São Paulo", "Zürich", "🤖🚀", "👨‍👩‍👧‍👦", "✅", "🇯🇵"}
	word := func() string {
		if r.IntN(5) > 0 {
			return common[r.IntN(len(common))]
		}
		var w strings.Builder
		for k := 1 + r.IntN(4); k > 0; k-- {
			w.WriteString(syllables[r.IntN(len(syllables))])
		}
		return w.String()
	}
	var b strings.Builder
	for count := 0; count < n; {
		before := b.Len()
		switch r.IntN(10) {
		case 0, 1:
			fmt.Fprintf(&b, "func %s%s(ctx context.Context, n int) (*%sResult, error) {\n\tif n > %d {\n\t\treturn nil, fmt.Errorf(\"%s: %%d\", n)\n\t}\n\tfor i := 0; i < n; i++ {\n\t\tsum += values[i] * 0x%X\n\t}\n\treturn &%sResult{Total: sum}, nil\n}\n\n",
				word(), strings.ToUpper(word()[:1]), word(), r.IntN(10000), word(), r.IntN(1<<20), word())
		case 2:
			b.WriteString(cjk[r.IntN(len(cjk))])
			b.WriteString(cjk[r.IntN(len(cjk))])
			b.WriteString("\n")
		case 3:
			fmt.Fprintf(&b, "On %d-%02d-%02d at %d:%02d, %s paid $%d.%02d (%d%%). ", 1990+r.IntN(40), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), word(), r.IntN(100000), r.IntN(100), r.IntN(100))
		case 4:
			b.WriteString(other[r.IntN(len(other))])
			b.WriteString(" ")
		default:
			for k := 8 + r.IntN(20); k > 0; k-- {
				w := word()
				if k%9 == 0 {
					w = strings.ToUpper(w[:1]) + w[1:]
				}
				b.WriteString(w)
				if r.IntN(8) == 0 {
					b.WriteString(",")
				}
				b.WriteString(" ")
			}
			b.WriteString(". ")
			if r.IntN(4) == 0 {
				b.WriteString("\r\n\r\n")
			}
		}
		count += utf8.RuneCountInString(b.String()[before:])
	}
	s := b.String()
	// Cut to exactly n characters.
	i, count := 0, 0
	for count < n {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		count++
	}
	return s[:i]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestEncodeBenchDocumentAgainstNode checks that encoding the benchmark's
// 200,000-character document with the real Qwen3 vocabulary gives the ids
// @lenml/tokenizers gives; BenchmarkEncodeAgainstNode times the two.
func TestEncodeBenchDocumentAgainstNode(t *testing.T) {
	doc := benchDocument(200_000)
	dir := qwen3Dir(t)
	reply := runNode(t, nodeRequest{
		Tokenizer: filepath.Join(dir, "tokenizer.json"),
		Config:    filepath.Join(dir, "tokenizer_config.json"),
		Texts:     []string{doc},
	})
	ids := qwen3(t).EncodeWithSpecials(doc)
	if !slices.Equal(ids, reply.IDs[0]) {
		t.Fatalf("Go and @lenml/tokenizers disagree on the benchmark document (%d vs %d tokens)", len(ids), len(reply.IDs[0]))
	}
}

// BenchmarkEncodeAgainstNode times encoding one 200,000-character document
// with the real Qwen3 vocabulary here and in @lenml/tokenizers on the same
// machine, and reports both: ns/op is Go's warm encode; go-cold-ms the
// first encode after loading (empty word caches); node-cold-ms and
// node-warm-ms the same for Node (warm: the median of 5 encodes). Timing is
// kept out of `go test`, where a loaded machine would make it flaky:
//
//	go test -run '^$' -bench EncodeAgainstNode ./engine/tokenizer
func BenchmarkEncodeAgainstNode(b *testing.B) {
	doc := benchDocument(200_000)
	file := filepath.Join(b.TempDir(), "doc.txt")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		b.Fatal(err)
	}
	dir := qwen3Dir(b)
	reply := runNode(b, nodeRequest{
		Tokenizer: filepath.Join(dir, "tokenizer.json"),
		Config:    filepath.Join(dir, "tokenizer_config.json"),
		Bench:     &nodeBench{File: file, Repeats: 5},
	})
	tok, err := Load(dir) // a fresh tokenizer, so the first encode is cold
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	ids := tok.EncodeWithSpecials(doc)
	cold := time.Since(start)
	if !slices.Equal(ids, reply.Bench.IDs) {
		b.Fatalf("Go and @lenml/tokenizers disagree on the benchmark document (%d vs %d tokens)", len(ids), len(reply.Bench.IDs))
	}
	b.SetBytes(int64(len(doc)))
	b.ResetTimer()
	for b.Loop() {
		tok.EncodeWithSpecials(doc)
	}
	b.ReportMetric(float64(cold.Microseconds())/1000, "go-cold-ms")
	b.ReportMetric(reply.Bench.ColdMS, "node-cold-ms")
	b.ReportMetric(median(reply.Bench.WarmMS), "node-warm-ms")
}

func BenchmarkEncode200k(b *testing.B) {
	doc := benchDocument(200_000)
	tok := qwen3(b)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		tok.EncodeWithSpecials(doc)
	}
}
