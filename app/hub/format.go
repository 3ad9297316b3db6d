package hub

import "fmt"

// formatMemory writes an amount of memory the way Apple sells it: binary
// gigabytes called GB ("24 GB" is 24 GiB).
func formatMemory(n int64) string {
	g := float64(n) / (1 << 30)
	if g >= 9.95 {
		return fmt.Sprintf("%.0f GB", g)
	}
	return fmt.Sprintf("%.1f GB", g)
}
