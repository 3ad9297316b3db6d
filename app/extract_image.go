package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
	"github.com/suzuran-app/suzuran/engine/imageproc"
)

// imageRecord is what extract reports for an image: its file, its size as
// displayed, and what the model would see of it.
type imageRecord struct {
	Name   string `json:"name"`
	Format string `json:"format"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// ResizedWidth and ResizedHeight are the size the model sees it at.
	ResizedWidth  int `json:"resized_width"`
	ResizedHeight int `json:"resized_height"`
	// Tokens is its cost in the prompt: one token a 32 × 32 pixel square
	// of the resized image.
	Tokens int      `json:"tokens"`
	Notes  []string `json:"notes,omitempty"`
}

// isImageFile reports whether path is a regular file whose first bytes
// are an image format's (HEIC and AVIF included, for their message). Only
// a regular file is opened, as extract promises.
func isImageFile(path string) bool {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := io.ReadFull(f, head)
	return imageproc.Sniff(head[:n]) != ""
}

// imageProcessor is the model's image processor, with the largest image
// limited to maxPixels; a model without one (the demo model) is reported
// and Qwen3.6's processor counts instead.
func imageProcessor(modelDir string, maxPixels int) (imageproc.Config, string) {
	cfg, err := imageproc.LoadConfig(modelDir)
	note := ""
	if err != nil {
		cfg = imageproc.Qwen36Config()
		note = fmt.Sprintf("the model in %s reads no images (no preprocessor_config.json); tokens are counted as Qwen3.6 would see them", modelDir)
	}
	return cfg.WithMaxPixels(maxPixels), note
}

// extractImage decodes an image as the chat would send it and measures
// its token cost.
func extractImage(path string, cfg imageproc.Config) (imageRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return imageRecord{}, err
	}
	if len(data) > imageproc.MaxFileBytes {
		return imageRecord{}, fmt.Errorf("%s: %s is larger than the %d MB an image may be: export a smaller copy", path, bytesize.Format(int64(len(data))), imageproc.MaxFileBytes>>20)
	}
	img, info, err := imageproc.Decode(data)
	if err != nil {
		return imageRecord{}, fmt.Errorf("%s: %w", path, err)
	}
	h, w, err := cfg.SmartResize(img.Height, img.Width)
	if err != nil {
		return imageRecord{}, fmt.Errorf("%s: %w", path, err)
	}
	tokens, err := cfg.TokenCost(img.Width, img.Height)
	if err != nil {
		return imageRecord{}, fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	r := imageRecord{
		Name: filepath.Base(path), Format: info.Format, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
		Width: img.Width, Height: img.Height, ResizedWidth: w, ResizedHeight: h, Tokens: tokens,
	}
	if info.Note != "" {
		r.Notes = append(r.Notes, info.Note)
	}
	if info.Orientation > 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("turned upright from its EXIF orientation %d", info.Orientation))
	}
	return r, nil
}

// describeImage is the line that lists an image on stderr.
func describeImage(r imageRecord) string {
	s := fmt.Sprintf("%s: %s image, %s, %d × %d pixels, seen at %d × %d, %d tokens",
		r.Name, formatLabel(r.Format), bytesize.Format(r.Size), r.Width, r.Height, r.ResizedWidth, r.ResizedHeight, r.Tokens)
	for _, n := range r.Notes {
		s += "\n  note: " + n
	}
	return s
}

func formatLabel(f string) string {
	switch f {
	case "jpeg":
		return "JPEG"
	case "webp":
		return "WebP"
	}
	b := []byte(f)
	for i := range b {
		if b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}
