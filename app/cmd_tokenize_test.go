package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every fixture string tokenizes through the command to the reference ids,
// and the ids decode back to the reference text exactly. The tiny model's
// tokenizer loads in milliseconds; the 151k-token Qwen3 one is checked on
// one string (engine/tokenizer tests all of them).
func TestTokenizeCommand(t *testing.T) {
	fx := repoFixtures(t)
	data, err := os.ReadFile(filepath.Join(fx, "tokenizer", "encode-tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct {
			Text    string `json:"text"`
			IDs     []int  `json:"ids"`
			Decoded string `json:"decoded"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(fx, "qwen35moe-tiny", "hf-bf16")
	for _, c := range f.Cases {
		out, err := runWithStdin(t, c.Text, "tokenize", "--model", model)
		if err != nil {
			t.Fatalf("%q: %v", c.Text, err)
		}
		var ids []int
		if err := json.Unmarshal([]byte(out), &ids); err != nil {
			t.Fatalf("%q: output %q is not a JSON array: %v", c.Text, out, err)
		}
		if !slices.Equal(ids, c.IDs) {
			t.Errorf("%q: got %v, want %v", c.Text, ids, c.IDs)
		}
		want, _ := json.Marshal(c.IDs)
		text, err := runWithStdin(t, string(want), "tokenize", "--model", model, "--decode")
		if err != nil {
			t.Fatal(err)
		}
		if text != c.Decoded {
			t.Errorf("decode %v: got %q, want %q", c.IDs, text, c.Decoded)
		}
	}

	// The demo model's tokenizer (4,096 ids, its specials at the top);
	// the ids are what @lenml/tokenizers, the engine/tokenizer tests' Node
	// reference, gives for the same text.
	demo := filepath.Join("..", "assets", "models", "suzuran-tiny")
	out, err := runWithStdin(t, "<|im_start|>user\nhi<|im_end|>", "tokenize", "--model", demo)
	if err != nil {
		t.Fatal(err)
	}
	if out != "[4093,278,198,71,72,4094]\n" {
		t.Errorf("demo: got %q", out)
	}

	// With --specials=false, control-token text is plain text.
	out, err = runWithStdin(t, "<|im_end|>", "tokenize", "--model", model, "--specials=false")
	if err != nil {
		t.Fatal(err)
	}
	var plain []int
	if err := json.Unmarshal([]byte(out), &plain); err != nil || len(plain) < 2 || slices.Contains(plain, 1022) {
		t.Errorf("--specials=false: got %s (%v), want <|im_end|> as plain text", out, err)
	}
	if _, err := runWithStdin(t, "[1, 999999]", "tokenize", "--model", model, "--decode"); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Errorf("out-of-range id: error %v", err)
	}
}
