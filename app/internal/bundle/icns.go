package bundle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/draw"
	"image/png"
)

// icnsSizes are the PNG-carrying icon types of the .icns format and their
// edge in pixels; macOS picks the one nearest to what it draws.
var icnsSizes = []struct {
	kind string
	edge int
}{
	{"icp4", 16},
	{"icp5", 32},
	{"icp6", 64},
	{"ic07", 128},
	{"ic08", 256},
	{"ic09", 512},
	{"ic10", 1024},
}

// ICNS turns the 1024×1024 app icon into an .icns file with every size
// from 16 to 1024, each a PNG. Each size is the one above it halved with a
// 2×2 box filter, so iconutil, which only exists on macOS, is not needed.
func ICNS(png1024 []byte) ([]byte, error) {
	src, err := png.Decode(bytes.NewReader(png1024))
	if err != nil {
		return nil, fmt.Errorf("app icon: %w", err)
	}
	if b := src.Bounds(); b.Dx() != 1024 || b.Dy() != 1024 {
		return nil, fmt.Errorf("app icon is %dx%d, want 1024x1024", b.Dx(), b.Dy())
	}
	// Premultiplied RGBA, so that averaging keeps the transparent edges of
	// the icon from turning dark.
	level := image.NewRGBA(image.Rect(0, 0, 1024, 1024))
	draw.Draw(level, level.Rect, src, src.Bounds().Min, draw.Src)
	images := map[int]*image.RGBA{1024: level}
	for edge := 512; edge >= 16; edge /= 2 {
		level = halve(level)
		images[edge] = level
	}

	var body bytes.Buffer
	for _, s := range icnsSizes {
		var img bytes.Buffer
		if err := png.Encode(&img, images[s.edge]); err != nil {
			return nil, err
		}
		body.WriteString(s.kind)
		_ = binary.Write(&body, binary.BigEndian, uint32(8+img.Len()))
		body.Write(img.Bytes())
	}
	var out bytes.Buffer
	out.WriteString("icns")
	_ = binary.Write(&out, binary.BigEndian, uint32(8+body.Len()))
	out.Write(body.Bytes())
	return out.Bytes(), nil
}

// halve averages each 2×2 block of src, rounding to nearest.
func halve(src *image.RGBA) *image.RGBA {
	w, h := src.Rect.Dx()/2, src.Rect.Dy()/2
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		top := src.Pix[(2*y)*src.Stride:]
		bottom := src.Pix[(2*y+1)*src.Stride:]
		row := dst.Pix[y*dst.Stride:]
		for x := 0; x < w; x++ {
			for c := 0; c < 4; c++ {
				i := 8*x + c
				sum := uint32(top[i]) + uint32(top[i+4]) + uint32(bottom[i]) + uint32(bottom[i+4])
				row[4*x+c] = uint8((sum + 2) / 4)
			}
		}
	}
	return dst
}
