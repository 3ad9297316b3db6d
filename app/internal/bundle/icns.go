package bundle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
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
// from 16 to 1024, each a PNG. Smaller sizes are box-filtered from the
// original (exact, since each edge divides 1024), so iconutil, which only
// exists on macOS, is not needed.
func ICNS(png1024 []byte) ([]byte, error) {
	src, err := png.Decode(bytes.NewReader(png1024))
	if err != nil {
		return nil, fmt.Errorf("app icon: %w", err)
	}
	if b := src.Bounds(); b.Dx() != 1024 || b.Dy() != 1024 {
		return nil, fmt.Errorf("app icon is %dx%d, want 1024x1024", b.Dx(), b.Dy())
	}
	var body bytes.Buffer
	for _, s := range icnsSizes {
		var img bytes.Buffer
		if err := png.Encode(&img, shrink(src, 1024/s.edge)); err != nil {
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

// shrink averages factor×factor blocks of premultiplied colour, which keeps
// the transparent edges of the icon from turning dark.
func shrink(src image.Image, factor int) image.Image {
	b := src.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, b.Dx()/factor, b.Dy()/factor))
	n := uint32(factor * factor)
	for y := 0; y < dst.Rect.Dy(); y++ {
		for x := 0; x < dst.Rect.Dx(); x++ {
			var r, g, bl, a uint32
			for dy := 0; dy < factor; dy++ {
				for dx := 0; dx < factor; dx++ {
					pr, pg, pb, pa := src.At(b.Min.X+x*factor+dx, b.Min.Y+y*factor+dy).RGBA()
					r, g, bl, a = r+pr, g+pg, bl+pb, a+pa
				}
			}
			dst.SetRGBA(x, y, color.RGBA{uint8(r / n >> 8), uint8(g / n >> 8), uint8(bl / n >> 8), uint8(a / n >> 8)})
		}
	}
	return dst
}
