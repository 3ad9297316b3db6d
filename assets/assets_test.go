package assets

import (
	"bytes"
	"image"
	"image/png"
	"testing"
)

// The icons are decoded as the tray and the bundle will decode them; a
// wrong size shows up blurred in the menu bar, so sizes are exact.
func TestIconsDecodeAtTheirSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		size int
	}{
		{"tray-template.png", TrayTemplate, 44},
		{"tray-color.png", TrayColor, 44},
		{"appicon.png", AppIcon, 1024},
	} {
		img, err := png.Decode(bytes.NewReader(tc.data))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if b := img.Bounds(); b.Dx() != tc.size || b.Dy() != tc.size {
			t.Errorf("%s is %dx%d, want %dx%d", tc.name, b.Dx(), b.Dy(), tc.size, tc.size)
		}
		if opaque, clear := alphaCounts(img); opaque == 0 || clear == 0 {
			t.Errorf("%s: %d opaque and %d transparent pixels; an icon needs both", tc.name, opaque, clear)
		}
	}
}

// The template icon must be pure black, or macOS cannot recolour it.
func TestTrayTemplateIsBlack(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(TrayTemplate))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if a > 0 && (r|g|bl) != 0 {
				t.Fatalf("pixel (%d,%d) is %d,%d,%d: a template icon is black with alpha only", x, y, r>>8, g>>8, bl>>8)
			}
		}
	}
}

func alphaCounts(img image.Image) (opaque, clear int) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			_, _, _, a := img.At(x, y).RGBA()
			switch {
			case a == 0xffff:
				opaque++
			case a == 0:
				clear++
			}
		}
	}
	return opaque, clear
}
