package checkpoint

import (
	"path/filepath"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
)

// BenchmarkLoad measures Load (config parsing, mapping, binding and
// validation) on the shipped small checkpoints.
func BenchmarkLoad(b *testing.B) {
	for _, d := range []string{
		fixtures.Path(b, "qwen35moe-tiny", "hf-bf16"),
		fixtures.Path(b, "qwen35moe-tiny", "mlx-4bit"),
		fixtures.Demo(b),
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
