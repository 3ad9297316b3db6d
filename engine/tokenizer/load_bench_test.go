package tokenizer

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

func BenchmarkLoadQwen3(b *testing.B) {
	dir := fixtures.Path(b, "tokenizer", "qwen3")
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}
