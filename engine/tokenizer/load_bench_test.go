package tokenizer

import "testing"

func BenchmarkLoadQwen3(b *testing.B) {
	dir := qwen3Dir(b)
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}
