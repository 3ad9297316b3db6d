package tokenizer

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// The hand-written reader must agree with encoding/json on the real files
// and on escapes they may contain.
func TestJSONScannerMatchesEncodingJSON(t *testing.T) {
	fx := fixtures.Path(t)
	for _, path := range []string{
		filepath.Join(qwen3Dir(t), "tokenizer.json"),
		filepath.Join(fx, "qwen35moe-tiny", "hf-bf16", "tokenizer.json"),
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Model struct {
				Vocab  json.RawMessage `json:"vocab"`
				Merges json.RawMessage `json:"merges"`
			} `json:"model"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		var wantVocab map[string]int
		var wantMerges [][2]string
		if err := json.Unmarshal(f.Model.Vocab, &wantVocab); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(f.Model.Merges, &wantMerges); err != nil {
			t.Fatal(err)
		}
		vocab, err := parseVocab(f.Model.Vocab)
		if err != nil {
			t.Fatal(err)
		}
		merges, err := parseMerges(f.Model.Merges)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(vocab, wantVocab) || !slices.Equal(merges, wantMerges) {
			t.Errorf("%s: vocab or merges differ from encoding/json", path)
		}
	}

	raw := []byte(`{"a\"b": 1, "\\n\/": 2, "\u00e9\ud83d\ude00": 3, "\ud800x": 4, "\t\b\f\r": 5, "plain": 6}`)
	var want map[string]int
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	got, err := parseVocab(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("escapes: got %v, want %v", got, want)
	}
	lines, err := parseMerges([]byte(`["a b", "Ġ t", "x  y"]`))
	if err != nil || !slices.Equal(lines, [][2]string{{"a", "b"}, {"Ġ", "t"}, {"x", " y"}}) {
		t.Errorf("string merges: %q, %v", lines, err)
	}
	for _, bad := range []string{`{"a": }`, `{"a" 1}`, `{"a": 1`, `{"\x": 1}`} {
		if _, err := parseVocab([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
