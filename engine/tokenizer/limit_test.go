package tokenizer

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// TestEncodeUpToMatchesEncode checks that a limit changes nothing but
// where encoding stops: at the exact count the ids are EncodeWithSpecials'
// ids, one token less is refused. The texts cover the fixtures' cases and
// long texts (past the 64 KiB window of the piece-by-piece path) with
// special tokens, whitespace runs and text NFC shortens.
func TestEncodeUpToMatchesEncode(t *testing.T) {
	tiny, err := Load(filepath.Join(fixtures.Path(t), "qwen35moe-tiny", "hf-bf16"))
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"x", "<|im_start|>user\nhi<|im_end|>\n",
		strings.Repeat("Hello, world! ", 10_000) + "<|im_end|>" + strings.Repeat(" ", 300) + "tail",
		strings.Repeat("e\u0301\u1100\u1161\u11a8 ", 20_000), // composed by NFC
		strings.Repeat("a", 100_000), strings.Repeat("日本語のテキスト。\n\n", 8_000)}
	for _, c := range loadCases(t, filepath.Join(fixtures.Path(t), "tokenizer", "encode-qwen3.json")) {
		texts = append(texts, c.Text)
	}
	for _, tok := range []*Tokenizer{tiny, qwen3(t)} {
		for _, text := range texts {
			want := tok.EncodeWithSpecials(text)
			if len(want) == 0 {
				continue
			}
			if m := tok.MinTokens(text); m > len(want) {
				t.Fatalf("MinTokens %d on %.40q, more than its %d tokens", m, text, len(want))
			}
			got, ok := tok.EncodeWithSpecialsUpTo(text, len(want))
			if !ok || !slices.Equal(got, want) {
				t.Fatalf("limit %d (the count) on %.40q: ok %v, %d ids, want the %d of EncodeWithSpecials", len(want), text, ok, len(got), len(want))
			}
			if got, ok := tok.EncodeWithSpecialsUpTo(text, len(want)-1); ok || got != nil {
				t.Fatalf("limit %d (one below the count) on %.40q: ok %v, %d ids, want refused", len(want)-1, text, ok, len(got))
			}
		}
	}
}

// TestEncodeUpToMemory encodes 30 MB texts against a limit of 32,768
// tokens (a prompt far too long for the context): what is allocated stays
// under 16 MiB (the ids up to the limit are 256 KiB; the rest is the
// window of piece offsets and the merges of the pieces read), where
// encoding the whole text allocates gigabytes.
func TestEncodeUpToMemory(t *testing.T) {
	tok := qwen3(t)
	const limit = 32_768
	for name, text := range map[string]string{
		"one letter":  strings.Repeat("a", 30<<20),
		"words":       strings.Repeat("hello world ", 30<<20/12),
		"whitespace":  strings.Repeat(" \n", 15<<20),
		"punctuation": strings.Repeat("a!", 15<<20),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ids, ok := tok.EncodeWithSpecialsUpTo(text, limit)
		runtime.ReadMemStats(&after)
		if ok || ids != nil {
			t.Errorf("%s: %d ids, ok %v: a 30 MB text passes %d tokens", name, len(ids), ok, limit)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
			t.Errorf("%s: %d MiB allocated to refuse a 30 MB text at %d tokens, want under 16 MiB", name, alloc>>20, limit)
		}
	}
}
