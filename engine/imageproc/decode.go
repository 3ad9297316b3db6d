package imageproc

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"strings"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

// MaxDecodePixels is the largest image Decode reads: 50 megapixels, above
// the 48-megapixel photos of current phones. Decoded, such an image holds
// 200 MB (400 MB at 16 bits a sample) before it is resized; a larger header
// is refused before any pixel is allocated.
const MaxDecodePixels = 50_000_000

// MaxFileBytes is the largest image file DecodeFile reads (256 MiB, above
// an uncompressed 50-megapixel BMP).
const MaxFileBytes = 256 << 20

var (
	// ErrTooLarge is returned for an image whose header declares more than
	// the pixel limit.
	ErrTooLarge = errors.New("image too large")
	// ErrFormat is returned for data that is no image format this package
	// reads.
	ErrFormat = errors.New("not an image this app reads (PNG, JPEG, GIF, WebP, BMP or TIFF)")
	// ErrHEIC is returned for HEIC/HEIF images off macOS.
	ErrHEIC = errors.New("HEIC images are read only on macOS: convert it to JPEG or PNG first (on a Mac: open it in Preview, File > Export, Format JPEG)")
)

// Info describes a decoded (or probed) image.
type Info struct {
	// Format is "png", "jpeg", "gif", "webp", "bmp" or "tiff".
	Format string
	// Width and Height are as displayed: after the EXIF orientation.
	Width, Height int
	// Orientation is the EXIF orientation (1 to 8) that was applied, 0
	// when the file has none.
	Orientation int
	// Frames is the number of frames of a GIF (1 for a still one), 1
	// otherwise.
	Frames int
	// Note says what was not read as the file holds it (the frames of an
	// animated GIF after the first), "" when nothing.
	Note string
}

// RGB is an 8-bit RGB image, rows top to bottom, 3 bytes a pixel.
type RGB struct {
	Width, Height int
	Pix           []uint8
}

// DecodeFile reads and decodes the image file at path (see Decode).
func DecodeFile(path string) (*RGB, Info, error) {
	data, err := readFileLimited(path)
	if err != nil {
		return nil, Info{}, err
	}
	img, info, err := Decode(data)
	if err != nil {
		return nil, info, fmt.Errorf("%s: %w", path, err)
	}
	return img, info, nil
}

// ProbeFile reads the header of the image file at path (see Probe).
func ProbeFile(path string) (Info, error) {
	data, err := readFileLimited(path)
	if err != nil {
		return Info{}, err
	}
	info, err := Probe(data)
	if err != nil {
		return info, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}

func readFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%s: %d MB is larger than the %d MB an image may be: export a smaller copy", path, fi.Size()>>20, MaxFileBytes>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than the %d MB an image may be: export a smaller copy", path, MaxFileBytes>>20)
	}
	return data, nil
}

// Sniff names the format of data from its first bytes: "png", "jpeg",
// "gif", "webp", "bmp", "tiff", "heic", "avif", or "" when unknown.
func Sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}):
		return "jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "gif"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "webp"
	case bytes.HasPrefix(data, []byte("BM")):
		return "bmp"
	case bytes.HasPrefix(data, []byte("II*\x00")), bytes.HasPrefix(data, []byte("MM\x00*")):
		return "tiff"
	case len(data) >= 12 && string(data[4:8]) == "ftyp":
		switch string(data[8:12]) {
		case "heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1":
			return "heic"
		case "avif", "avis":
			return "avif"
		}
	}
	return ""
}

type codec struct {
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
}

var codecs = map[string]codec{
	"png":  {png.DecodeConfig, png.Decode},
	"jpeg": {jpeg.DecodeConfig, jpeg.Decode},
	"gif":  {gif.DecodeConfig, gif.Decode}, // gif.Decode stops after the first frame
	"webp": {webp.DecodeConfig, webp.Decode},
	"bmp":  {bmp.DecodeConfig, bmp.Decode},
	"tiff": {tiff.DecodeConfig, tiff.Decode},
}

// Probe reads an image's format, displayed size and orientation from its
// header, without decoding its pixels; it refuses what Decode would refuse
// for its size.
func Probe(data []byte) (Info, error) {
	return probe(data, MaxDecodePixels)
}

func probe(data []byte, limit int) (Info, error) {
	format := Sniff(data)
	info := Info{Format: format, Frames: 1}
	switch format {
	case "":
		return info, ErrFormat
	case "heic":
		return heicProbe(data, limit)
	case "avif":
		return info, errors.New("AVIF images are not read: convert it to JPEG or PNG first")
	}
	cfg, err := codecs[format].config(bytes.NewReader(data))
	if err != nil {
		return info, corrupt(format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return info, fmt.Errorf("the %s header declares %d × %d pixels: the file is damaged", formatName(format), cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > int64(limit) {
		return info, fmt.Errorf("%w: the %s declares %d × %d pixels (%.1f megapixels), above the %.0f megapixels an image may have: export a smaller copy",
			ErrTooLarge, formatName(format), cfg.Width, cfg.Height, float64(cfg.Width)*float64(cfg.Height)/1e6, float64(limit)/1e6)
	}
	info.Width, info.Height = cfg.Width, cfg.Height
	info.Orientation = exifOrientation(format, data)
	if info.Orientation >= 5 {
		info.Width, info.Height = info.Height, info.Width
	}
	if format == "gif" {
		info.Frames = gifFrames(data)
		if info.Frames > 1 {
			info.Note = fmt.Sprintf("animated GIF: the first of its %d frames is read", info.Frames)
		}
	}
	return info, nil
}

// Decode decodes an image file's bytes into 8-bit RGB as PIL's
// convert("RGB") gives it, with the EXIF orientation applied. The header's
// size is checked against MaxDecodePixels before the pixels are decoded.
func Decode(data []byte) (*RGB, Info, error) {
	return DecodeLimit(data, MaxDecodePixels)
}

// DecodeLimit is Decode with another pixel limit.
func DecodeLimit(data []byte, limit int) (*RGB, Info, error) {
	info, err := probe(data, limit)
	if err != nil {
		return nil, info, err
	}
	if info.Format == "heic" {
		img, err := heicDecode(data, info)
		if err != nil {
			return nil, info, err
		}
		info.Width, info.Height = img.Width, img.Height
		return img, info, nil
	}
	m, err := decodeSafely(codecs[info.Format].decode, data)
	if err != nil {
		return nil, info, corrupt(info.Format, err)
	}
	b := m.Bounds()
	if int64(b.Dx())*int64(b.Dy()) > int64(limit) || b.Dx() <= 0 || b.Dy() <= 0 {
		return nil, info, fmt.Errorf("the %s decodes to %d × %d pixels, not the size its header declares: the file is damaged", formatName(info.Format), b.Dx(), b.Dy())
	}
	var img *RGB
	switch {
	case info.Format == "gif":
		if pm, ok := m.(*image.Paletted); ok {
			img, _ = gifToRGB(data, pm, info.Width, info.Height)
		}
	case info.Format == "webp":
		if yc, ok := webpYCbCr(info.Format, m); ok {
			img = webpToRGB(yc)
		}
	case info.Format == "jpeg":
		if yc, ok := jpegYCbCr(info.Format, m); ok {
			img = jpegToRGB(yc)
		}
	}
	if img == nil {
		img = toRGB(m)
	}
	sw, sh := info.Width, info.Height // the stored size, before orientation
	if info.Orientation >= 5 {
		sw, sh = sh, sw
	}
	if img.Width != sw || img.Height != sh {
		return nil, info, fmt.Errorf("the %s decodes to %d × %d pixels, not the %d × %d its header declares: the file is damaged", formatName(info.Format), img.Width, img.Height, sw, sh)
	}
	if info.Orientation > 1 {
		img = orient(img, info.Orientation)
	}
	return img, info, nil
}

// decodeSafely runs a decoder, turning a panic inside it (a decoder bug on
// a crafted file) into an error.
func decodeSafely(decode func(io.Reader) (image.Image, error), data []byte) (m image.Image, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("decoder failed: %v", r)
		}
	}()
	return decode(bytes.NewReader(data))
}

func formatName(format string) string {
	switch format {
	case "png", "gif", "bmp", "heic":
		return map[string]string{"png": "PNG", "gif": "GIF", "bmp": "BMP", "heic": "HEIC"}[format]
	case "jpeg":
		return "JPEG"
	case "webp":
		return "WebP"
	case "tiff":
		return "TIFF"
	}
	return format
}

func corrupt(format string, err error) error {
	// png reports a file cut inside its pixel data as "not enough pixel
	// data", the others as an unexpected EOF.
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "not enough pixel data") || strings.Contains(err.Error(), "unexpected EOF") {
		return fmt.Errorf("the %s file is cut short (%v): the file is incomplete, save or download it again", formatName(format), err)
	}
	return fmt.Errorf("the %s file is damaged or uses a variant that is not read (%v): open it in an image viewer and export it again as PNG or JPEG", formatName(format), err)
}

// toRGB converts a decoded image to 8-bit RGB as PIL's convert("RGB")
// does: the stored (straight) colour is kept and alpha dropped; grey is
// repeated; 16-bit samples keep their high byte; CMYK as PIL's cmyk2rgb.
func toRGB(m image.Image) *RGB {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	out := &RGB{Width: w, Height: h, Pix: make([]uint8, 3*w*h)}
	p := out.Pix
	switch m := m.(type) {
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			row := m.Pix[(y)*m.Stride:]
			for x := 0; x < w; x++ {
				copy(p[3*(y*w+x):], row[4*x:4*x+3])
			}
		}
	case *image.RGBA:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				c := color.RGBA{row[4*x], row[4*x+1], row[4*x+2], row[4*x+3]}
				if c.A != 0xff {
					n := color.NRGBAModel.Convert(c).(color.NRGBA)
					c.R, c.G, c.B = n.R, n.G, n.B
				}
				i := 3 * (y*w + x)
				p[i], p[i+1], p[i+2] = c.R, c.G, c.B
			}
		}
	case *image.NRGBA64: // 16-bit PNG with alpha: the high bytes
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				i := 3 * (y*w + x)
				p[i], p[i+1], p[i+2] = row[8*x], row[8*x+2], row[8*x+4]
			}
		}
	case *image.Gray16:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				i := 3 * (y*w + x)
				p[i], p[i+1], p[i+2] = row[2*x], row[2*x], row[2*x]
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				i := 3 * (y*w + x)
				p[i], p[i+1], p[i+2] = row[x], row[x], row[x]
			}
		}
	case *image.YCbCr:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := m.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bb := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				i := 3 * (y*w + x)
				p[i], p[i+1], p[i+2] = r, g, bb
			}
		}
	case *image.CMYK:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				c, mm, yy, k := row[4*x], row[4*x+1], row[4*x+2], row[4*x+3]
				i := 3 * (y*w + x)
				p[i], p[i+1], p[i+2] = cmykChannel(c, k), cmykChannel(mm, k), cmykChannel(yy, k)
			}
		}
	case *image.Paletted:
		var table [256][3]uint8
		for i, c := range m.Palette {
			if i == 256 {
				break
			}
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			table[i] = [3]uint8{n.R, n.G, n.B}
		}
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				copy(p[3*(y*w+x):], table[row[x]][:])
			}
		}
	default:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				n := color.NRGBAModel.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				i := 3 * (y*w + x)
				p[i], p[i+1], p[i+2] = n.R, n.G, n.B
			}
		}
	}
	return out
}

// cmykChannel is PIL's cmyk2rgb for one channel: (255-K) - C·(255-K)/255,
// the product rounded as its MULDIV255.
func cmykChannel(c, k uint8) uint8 {
	nk := 255 - int(k)
	t := int(c)*nk + 128
	v := nk - ((t>>8)+t)>>8
	return uint8(max(0, min(255, v)))
}

// orient applies EXIF orientation o (2 to 8) as PIL's exif_transpose does.
func orient(img *RGB, o int) *RGB {
	w, h := img.Width, img.Height
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	out := &RGB{Width: ow, Height: oh, Pix: make([]uint8, len(img.Pix))}
	for y := 0; y < oh; y++ {
		for x := 0; x < ow; x++ {
			var sx, sy int
			switch o {
			case 2: // mirrored left to right
				sx, sy = w-1-x, y
			case 3: // rotated 180°
				sx, sy = w-1-x, h-1-y
			case 4: // mirrored top to bottom
				sx, sy = x, h-1-y
			case 5: // transposed
				sx, sy = y, x
			case 6: // stored rotated 90° anticlockwise: turn it clockwise
				sx, sy = y, h-1-x
			case 7: // transversed
				sx, sy = w-1-y, h-1-x
			case 8: // stored rotated 90° clockwise: turn it anticlockwise
				sx, sy = w-1-y, x
			default:
				sx, sy = x, y
			}
			copy(out.Pix[3*(y*ow+x):3*(y*ow+x)+3], img.Pix[3*(sy*w+sx):])
		}
	}
	return out
}
