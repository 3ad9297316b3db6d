//go:build !darwin

package imageproc

// HEIC is decoded by macOS's ImageIO; elsewhere it is refused.

func heicProbe(data []byte, limit int) (Info, error) {
	return Info{Format: "heic", Frames: 1}, ErrHEIC
}

func heicDecode(data []byte, info Info) (*RGB, error) { return nil, ErrHEIC }
