package checkpoint

import (
	"path/filepath"
	"testing"
)

// BenchmarkLoad measures Load (config parsing, mapping, binding and
// validation) on the shipped small checkpoints.
func BenchmarkLoad(b *testing.B) {
	for _, d := range []string{
		fixture(b, "qwen35moe-tiny", "hf-bf16"),
		fixture(b, "qwen35moe-tiny", "mlx-4bit"),
		filepath.Join(sharedDir(b), "demo", "suzuran-tiny"),
	} {
		b.Run(filepath.Base(d), func(b *testing.B) {
			for b.Loop() {
				m, err := Load(d)
				if err != nil {
					b.Fatal(err)
				}
				m.Close()
			}
		})
	}
}
