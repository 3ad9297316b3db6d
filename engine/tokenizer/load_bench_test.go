package tokenizer

import (
	"path/filepath"
	"testing"
)

func BenchmarkLoadQwen3(b *testing.B) {
	dir := filepath.Join(fixturesDir(b), "tokenizer", "qwen3")
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}
