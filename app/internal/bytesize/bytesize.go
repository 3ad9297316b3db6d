// Package bytesize writes sizes for people, the one way every message of
// the app does (downloads, disk space, document limits).
package bytesize

import "fmt"

// Format writes a size the way Finder does: decimal units, three
// significant digits ("20.4 GB", "812 MB", "1.40 MB").
func Format(n int64) string {
	units := []string{"bytes", "KB", "MB", "GB", "TB"}
	v := float64(n)
	i := 0
	for v >= 999.5 && i < len(units)-1 {
		v /= 1000
		i++
	}
	switch {
	case n == 1:
		return "1 byte"
	case i == 0:
		return fmt.Sprintf("%d bytes", n)
	case v < 9.995:
		return fmt.Sprintf("%.2f %s", v, units[i])
	case v < 99.95:
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.0f %s", v, units[i])
}
