package imageproc

import "image"

// PIL reads a GIF's first frame as a palette image of the logical
// screen's size and converts it to RGB through the palette, ignoring
// transparency: a transparent pixel shows its palette entry's colour, and
// where the first frame does not cover the screen, PIL's fill index shows
// (the transparent index, else 0: its load_prepare and new image). image/gif
// returns the frame alone, at its own bounds, with the transparent entry
// replaced by transparent black; gifToRGB puts back what PIL shows, from
// the file's own colour table.

// gifFirst reads the first frame's colour table (local, else global) and
// its transparent index (-1 if none).
func gifFirst(data []byte) (table [][3]uint8, transparent int, ok bool) {
	if len(data) < 13 {
		return nil, -1, false
	}
	readTable := func(p, flags int) ([][3]uint8, int, bool) {
		n := 1 << (flags&7 + 1)
		if p+3*n > len(data) {
			return nil, p, false
		}
		t := make([][3]uint8, n)
		for i := range t {
			t[i] = [3]uint8{data[p+3*i], data[p+3*i+1], data[p+3*i+2]}
		}
		return t, p + 3*n, true
	}
	var global [][3]uint8
	p := 13
	transparent = -1
	if flags := int(data[10]); flags&0x80 != 0 {
		if global, p, ok = readTable(p, flags); !ok {
			return nil, -1, false
		}
	}
	for p < len(data) {
		switch data[p] {
		case 0x21:
			if p+1 < len(data) && data[p+1] == 0xf9 && p+7 < len(data) && data[p+2] == 4 {
				if data[p+3]&1 != 0 {
					transparent = int(data[p+6])
				} else {
					transparent = -1
				}
			}
			p += 2
			for p < len(data) && data[p] != 0 {
				p += int(data[p]) + 1
			}
			p++
		case 0x2c:
			if p+10 > len(data) {
				return nil, -1, false
			}
			if flags := int(data[p+9]); flags&0x80 != 0 {
				local, _, ok := readTable(p+10, flags)
				return local, transparent, ok
			}
			return global, transparent, global != nil
		default:
			return nil, -1, false
		}
	}
	return nil, -1, false
}

// gifToRGB renders the first frame m on the logical screen of w × h
// pixels as PIL's convert("RGB") shows it; ok is false when the file's
// tables cannot be read back, and toRGB's conversion is used.
func gifToRGB(data []byte, m *image.Paletted, w, h int) (*RGB, bool) {
	table, transparent, ok := gifFirst(data)
	if !ok {
		return nil, false
	}
	var lut [256][3]uint8
	copy(lut[:], table)
	out := &RGB{Width: w, Height: h, Pix: make([]uint8, 3*w*h)}
	if transparent > 0 && transparent < 256 { // index 0 is the zeroed image's
		for i := 0; i < w*h; i++ {
			copy(out.Pix[3*i:3*i+3], lut[transparent][:])
		}
	} else {
		for i := 0; i < w*h; i++ {
			copy(out.Pix[3*i:3*i+3], lut[0][:])
		}
	}
	r := m.Rect.Intersect(image.Rect(0, 0, w, h))
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			copy(out.Pix[3*(y*w+x):3*(y*w+x)+3], lut[m.Pix[m.PixOffset(x, y)]][:])
		}
	}
	return out, true
}
