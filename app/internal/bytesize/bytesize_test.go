package bytesize

import "testing"

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1: "1 byte", 999: "999 bytes", 1000: "1.00 KB", 1_334_192: "1.33 MB",
		20_400_000_000: "20.4 GB", 999_600_000: "1.00 GB", 512e9: "512 GB",
		// The document limits: 64 MiB and 2 MiB.
		64 << 20: "67.1 MB", 2 << 20: "2.10 MB",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
