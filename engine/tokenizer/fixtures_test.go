package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

type encodeCase struct {
	Text    string `json:"text"`
	IDs     []int  `json:"ids"`
	Decoded string `json:"decoded"`
}

func loadCases(t testing.TB, path string) []encodeCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []encodeCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(f.Cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return f.Cases
}

var (
	qwen3Once sync.Once
	qwen3Tok  *Tokenizer
	qwen3Err  error
)

// qwen3 loads the real 151k-token Qwen3 tokenizer once per test binary.
func qwen3(t testing.TB) *Tokenizer {
	t.Helper()
	dir := qwen3Dir(t)
	qwen3Once.Do(func() { qwen3Tok, qwen3Err = Load(dir) })
	if qwen3Err != nil {
		t.Fatal(qwen3Err)
	}
	return qwen3Tok
}

// The fixtures were made by Hugging Face tokenizers' encode, which
// recognises special tokens, so they are compared with EncodeWithSpecials.
func TestFixtureEncodings(t *testing.T) {
	fx := fixtures.Path(t)
	tiny, err := Load(filepath.Join(fx, "qwen35moe-tiny", "hf-bf16"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		tok   *Tokenizer
		cases string
	}{
		{"tiny", tiny, filepath.Join(fx, "tokenizer", "encode-tiny.json")},
		{"qwen3", qwen3(t), filepath.Join(fx, "tokenizer", "encode-qwen3.json")},
	} {
		for i, c := range loadCases(t, tc.cases) {
			got := tc.tok.EncodeWithSpecials(c.Text)
			if !slices.Equal(got, c.IDs) {
				t.Errorf("%s case %d %q:\n got  %v\n want %v", tc.name, i, c.Text, got, c.IDs)
			}
			if dec := tc.tok.Decode(c.IDs); dec != c.Decoded {
				t.Errorf("%s case %d: Decode = %q, want %q", tc.name, i, dec, c.Decoded)
			}
		}
	}
}
