package imageproc

import (
	"bytes"
	"encoding/binary"
)

// exifOrientation returns the EXIF orientation (1 to 8) of an image file,
// 0 when it has none or it cannot be read: from a JPEG's APP1 Exif
// segment, a PNG's eXIf chunk, a WebP's EXIF chunk, or a TIFF's own first
// directory, as PIL's getexif finds it. A damaged EXIF block is ignored,
// as the image itself can still be read.
func exifOrientation(format string, data []byte) int {
	switch format {
	case "jpeg":
		return jpegOrientation(data)
	case "png":
		// 8-byte signature, then chunks: length, type, data, CRC.
		for p := 8; p+8 <= len(data); {
			n := int(binary.BigEndian.Uint32(data[p:]))
			typ := string(data[p+4 : p+8])
			if n < 0 || n > len(data)-p-12 {
				return 0
			}
			if typ == "eXIf" {
				return tiffOrientation(data[p+8 : p+8+n])
			}
			if typ == "IDAT" || typ == "IEND" {
				return 0
			}
			p += 12 + n
		}
	case "webp":
		// RIFF header (12 bytes), then chunks: fourcc, little-endian size,
		// data padded to even length.
		for p := 12; p+8 <= len(data); {
			n := int(binary.LittleEndian.Uint32(data[p+4:]))
			if n < 0 || n > len(data)-p-8 {
				return 0
			}
			if string(data[p:p+4]) == "EXIF" {
				return tiffOrientation(bytes.TrimPrefix(data[p+8:p+8+n], []byte("Exif\x00\x00")))
			}
			p += 8 + n + n&1
		}
	case "tiff":
		return tiffOrientation(data)
	}
	return 0
}

// jpegOrientation walks a JPEG's marker segments up to the scan.
func jpegOrientation(data []byte) int {
	for p := 2; p+4 <= len(data); {
		if data[p] != 0xff {
			return 0
		}
		marker := data[p+1]
		switch {
		case marker == 0xff: // fill byte
			p++
			continue
		case marker == 0x01 || (marker >= 0xd0 && marker <= 0xd8):
			p += 2
			continue
		case marker == 0xda || marker == 0xd9: // start of scan, end of image
			return 0
		}
		n := int(binary.BigEndian.Uint16(data[p+2:]))
		if n < 2 || p+2+n > len(data) {
			return 0
		}
		seg := data[p+4 : p+2+n]
		if marker == 0xe1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
			return tiffOrientation(seg[6:])
		}
		p += 2 + n
	}
	return 0
}

// tiffOrientation reads tag 0x0112 (Orientation, SHORT) from the first
// directory of a TIFF structure.
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 0
	}
	if bo.Uint16(t[2:]) != 42 {
		return 0
	}
	off := uint64(bo.Uint32(t[4:]))
	if off+2 > uint64(len(t)) {
		return 0
	}
	count := uint64(bo.Uint16(t[off:]))
	for i := uint64(0); i < count; i++ {
		e := off + 2 + 12*i
		if e+12 > uint64(len(t)) {
			return 0
		}
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		if bo.Uint16(t[e+2:]) != 3 || bo.Uint32(t[e+4:]) < 1 { // SHORT, at least one
			return 0
		}
		if v := int(bo.Uint16(t[e+8:])); v >= 1 && v <= 8 {
			return v
		}
		return 0
	}
	return 0
}

// gifFrames counts the image descriptors of a GIF by walking its blocks,
// without decoding them; a damaged stream counts the frames before the
// damage.
func gifFrames(data []byte) int {
	if len(data) < 13 {
		return 0
	}
	p := 13
	if flags := data[10]; flags&0x80 != 0 { // global colour table
		p += 3 << (flags&7 + 1)
	}
	frames := 0
	skipSubBlocks := func() bool {
		for p < len(data) {
			n := int(data[p])
			p++
			if n == 0 {
				return true
			}
			p += n
		}
		return false
	}
	for p < len(data) {
		switch data[p] {
		case 0x21: // extension: label, then sub-blocks
			p += 2
			if !skipSubBlocks() {
				return frames
			}
		case 0x2c: // image descriptor
			if p+10 > len(data) {
				return frames
			}
			frames++
			flags := data[p+9]
			p += 10
			if flags&0x80 != 0 { // local colour table
				p += 3 << (flags&7 + 1)
			}
			p++ // LZW minimum code size
			if !skipSubBlocks() {
				return frames
			}
		default: // trailer (0x3b) or damage
			return frames
		}
	}
	return frames
}
