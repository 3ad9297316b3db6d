package imageproc

import (
	"bytes"
	"compress/lzw"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// testImage is a 48 × 32 NRGBA image of six 16 × 16 blocks of distinct
// colours (3 columns, 2 rows), a gradient inside each.
func testImage() *image.NRGBA {
	colors := [2][3]color.NRGBA{
		{{220, 30, 30, 255}, {30, 200, 40, 255}, {30, 40, 220, 255}},
		{{230, 220, 30, 255}, {30, 210, 220, 255}, {210, 40, 200, 255}},
	}
	m := image.NewNRGBA(image.Rect(0, 0, 48, 32))
	for y := 0; y < 32; y++ {
		for x := 0; x < 48; x++ {
			c := colors[y/16][x/16]
			c.R = uint8(int(c.R) * (200 + x%16) / 215)
			m.SetNRGBA(x, y, c)
		}
	}
	return m
}

func encodeWith(t testing.TB, enc func(*bytes.Buffer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := enc(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// samples are a valid file of every format read.
func samples(t testing.TB) map[string][]byte {
	m := testImage()
	pal := image.NewPaletted(m.Bounds(), palette6())
	for y := 0; y < 32; y++ {
		for x := 0; x < 48; x++ {
			pal.SetColorIndex(x, y, uint8(y/16*3+x/16))
		}
	}
	return map[string][]byte{
		"png":  encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, m) }),
		"jpeg": encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, m, &jpeg.Options{Quality: 95}) }),
		"gif":  encodeWith(t, func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) }),
		"bmp":  encodeWith(t, func(b *bytes.Buffer) error { return bmp.Encode(b, m) }),
		"tiff": encodeWith(t, func(b *bytes.Buffer) error {
			return tiff.Encode(b, m, &tiff.Options{Compression: tiff.Deflate, Predictor: true})
		}),
		"webp": readTestdata(t, "photo.webp"),
	}
}

func palette6() color.Palette {
	p := color.Palette{}
	for _, c := range [][3]uint8{{220, 30, 30}, {30, 200, 40}, {30, 40, 220}, {230, 220, 30}, {30, 210, 220}, {210, 40, 200}} {
		p = append(p, color.RGBA{c[0], c[1], c[2], 255})
	}
	return p
}

// meanAbsDiff is the mean absolute difference of two RGB images' samples.
func meanAbsDiff(t testing.TB, a, b *RGB) float64 {
	t.Helper()
	if a.Width != b.Width || a.Height != b.Height {
		t.Fatalf("sizes differ: %d × %d and %d × %d", a.Width, a.Height, b.Width, b.Height)
	}
	var s float64
	for i := range a.Pix {
		s += math.Abs(float64(a.Pix[i]) - float64(b.Pix[i]))
	}
	return s / float64(len(a.Pix))
}

func TestDecodeFormats(t *testing.T) {
	want := toRGB(testImage())
	for format, data := range samples(t) {
		img, info, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if info.Format != format || info.Frames != 1 || info.Note != "" {
			t.Errorf("%s: info %+v", format, info)
		}
		if format == "webp" { // image0.png, lossy
			ref, _, err := DecodeFile(filepath.Join("testdata", "image0.png"))
			if err != nil {
				t.Fatal(err)
			}
			lossless, _, err := DecodeFile(filepath.Join("testdata", "lossless.webp"))
			if err != nil {
				t.Fatal(err)
			}
			if d := meanAbsDiff(t, lossless, ref); d != 0 {
				t.Errorf("lossless WebP differs from its PNG by %.3g on average", d)
			}
			// Lossy at quality 90, chroma subsampled: a few levels.
			if d := meanAbsDiff(t, img, ref); d > 6 {
				t.Errorf("lossy WebP differs from its PNG by %.3g levels on average (bound 6)", d)
			}
			continue
		}
		d := meanAbsDiff(t, img, want)
		bound := 0.0 // lossless formats
		switch format {
		case "jpeg":
			bound = 6 // quality 95, 4:2:0 chroma smoothed across the sharp block edges as libjpeg does
		case "gif":
			bound = 8 // the palette is the blocks' base colours, without the gradient
		}
		if d > bound {
			t.Errorf("%s: differs by %.3g levels on average (bound %g)", format, d, bound)
		}
	}
}

// rawPNG writes a PNG of the given colour type and bit depth whose rows
// are given unfiltered (a 0 filter byte is added to each), or, when rows
// is nil, a header with one empty IDAT chunk: what a bomb's first bytes
// look like.
func rawPNG(w, h int, colorType, depth byte, rows [][]byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		b.WriteString(typ)
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc.Sum32())
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = depth, colorType
	chunk("IHDR", ihdr)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	for _, r := range rows {
		zw.Write([]byte{0})
		zw.Write(r)
	}
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return b.Bytes()
}

func TestGreyAlphaPNG(t *testing.T) {
	// Colour type 4 (grey + alpha, 8 bits): grey 200 at every opacity;
	// PIL's convert("RGB") keeps the grey and drops the alpha.
	const w, h = 16, 2
	rows := make([][]byte, h)
	for y := range rows {
		for x := 0; x < w; x++ {
			rows[y] = append(rows[y], 200, byte(x*17))
		}
	}
	img, info, err := Decode(rawPNG(w, h, 4, 8, rows))
	if err != nil {
		t.Fatal(err)
	}
	if info.Width != w || info.Height != h {
		t.Fatalf("size %d × %d", info.Width, info.Height)
	}
	for i, v := range img.Pix {
		if v != 200 {
			t.Fatalf("sample %d is %d, want 200 (grey kept, alpha dropped)", i, v)
		}
	}
}

func TestSixteenBitPNG(t *testing.T) {
	// 16-bit RGBA: the high byte of each sample, alpha dropped (a fully
	// transparent pixel keeps its colour, as in PIL).
	m := image.NewNRGBA64(image.Rect(0, 0, 4, 4))
	for y := 0; y < 4; y++ {
		for x := 0; x < 4; x++ {
			m.SetNRGBA64(x, y, color.NRGBA64{R: 0x12ab, G: 0xfe01, B: uint16(x * 0x4040), A: uint16(0x5555 * y)})
		}
	}
	data := encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, m) })
	if data[24] != 16 {
		t.Fatalf("the encoder wrote bit depth %d", data[24])
	}
	img, _, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	for y := 0; y < 4; y++ {
		for x := 0; x < 4; x++ {
			got := img.Pix[3*(4*y+x):][:3]
			want := []uint8{0x12, 0xfe, uint8(x * 0x40)}
			if !bytes.Equal(got, want) {
				t.Errorf("(%d,%d): %v, want %v", x, y, got, want)
			}
		}
	}
	// Opaque 16-bit grey.
	g := image.NewGray16(image.Rect(0, 0, 2, 1))
	g.SetGray16(0, 0, color.Gray16{Y: 0x80ff})
	g.SetGray16(1, 0, color.Gray16{Y: 0xffff})
	img, _, err = Decode(encodeWith(t, func(b *bytes.Buffer) error { return png.Encode(b, g) }))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img.Pix, []uint8{0x80, 0x80, 0x80, 0xff, 0xff, 0xff}) {
		t.Errorf("16-bit grey: %v", img.Pix)
	}
}

func TestCMYKJPEG(t *testing.T) {
	// ImageMagick's CMYK JPEG of image2.png (Adobe, inverted samples):
	// back to RGB within JPEG's loss of the PNG; read with the wrong
	// polarity or channel order it would be off by ~100 levels.
	img, info, err := DecodeFile(filepath.Join("testdata", "cmyk.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := DecodeFile(filepath.Join("testdata", "image2.png"))
	if err != nil {
		t.Fatal(err)
	}
	d := meanAbsDiff(t, img, ref)
	t.Logf("CMYK JPEG %d × %d: %.2f levels from its PNG on average", info.Width, info.Height, d)
	if d > 6 {
		t.Errorf("CMYK JPEG differs from its PNG by %.3g levels on average (bound 6, JPEG quality 90)", d)
	}
	// PIL's cmyk2rgb on single values.
	for _, c := range []struct{ c, k, want uint8 }{{0, 0, 255}, {255, 0, 0}, {0, 255, 0}, {128, 64, 95}, {10, 200, 53}} {
		if got := cmykChannel(c.c, c.k); got != c.want {
			t.Errorf("cmyk %d,%d: %d, want %d", c.c, c.k, got, c.want)
		}
	}
}

// withOrientation inserts an APP1 Exif segment holding orientation o
// after a JPEG's SOI marker (big-endian TIFF, one IFD entry).
func withOrientation(jpg []byte, o uint16) []byte {
	var tiffData bytes.Buffer
	tiffData.WriteString("MM\x00\x2a")
	binary.Write(&tiffData, binary.BigEndian, uint32(8))
	binary.Write(&tiffData, binary.BigEndian, uint16(1))
	binary.Write(&tiffData, binary.BigEndian, []uint16{0x0112, 3})
	binary.Write(&tiffData, binary.BigEndian, uint32(1))
	binary.Write(&tiffData, binary.BigEndian, []uint16{o, 0})
	binary.Write(&tiffData, binary.BigEndian, uint32(0))
	seg := append([]byte("Exif\x00\x00"), tiffData.Bytes()...)
	var b bytes.Buffer
	b.Write(jpg[:2])
	b.Write([]byte{0xff, 0xe1})
	binary.Write(&b, binary.BigEndian, uint16(len(seg)+2))
	b.Write(seg)
	b.Write(jpg[2:])
	return b.Bytes()
}

func TestEXIFOrientation(t *testing.T) {
	jpg := encodeWith(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, testImage(), &jpeg.Options{Quality: 100}) })
	// The stored blocks (column, row) that show at the displayed image's
	// top-left and top-right corners, as PIL's exif_transpose turns them.
	type corner struct{ c, r int }
	cases := map[uint16][2]corner{
		1: {{0, 0}, {2, 0}},
		2: {{2, 0}, {0, 0}}, // mirrored
		3: {{2, 1}, {0, 1}}, // 180°
		4: {{0, 1}, {2, 1}}, // flipped
		5: {{0, 0}, {0, 1}}, // transposed
		6: {{0, 1}, {0, 0}}, // turned clockwise to display
		7: {{2, 1}, {2, 0}}, // transversed
		8: {{2, 0}, {2, 1}}, // turned anticlockwise to display
	}
	stored := testImage()
	blockColour := func(c corner) [3]uint8 {
		p := stored.NRGBAAt(c.c*16+8, c.r*16+8)
		return [3]uint8{p.R, p.G, p.B}
	}
	for o, want := range cases {
		img, info, err := Decode(withOrientation(jpg, o))
		if err != nil {
			t.Fatalf("orientation %d: %v", o, err)
		}
		ww, wh := 48, 32
		if o >= 5 {
			ww, wh = 32, 48
		}
		if info.Orientation != int(o) || img.Width != ww || img.Height != wh || info.Width != ww || info.Height != wh {
			t.Fatalf("orientation %d: read as %d, image %d × %d, info %d × %d", o, info.Orientation, img.Width, img.Height, info.Width, info.Height)
		}
		probe, err := Probe(withOrientation(jpg, o))
		if err != nil || probe.Width != ww || probe.Height != wh {
			t.Errorf("orientation %d: Probe %+v %v", o, probe, err)
		}
		for k, at := range [2][2]int{{4, 4}, {ww - 5, 4}} {
			got := img.Pix[3*(at[1]*img.Width+at[0]):][:3]
			exp := blockColour(want[k])
			for ch := 0; ch < 3; ch++ {
				if math.Abs(float64(got[ch])-float64(exp[ch])) > 24 {
					t.Errorf("orientation %d corner %d: %v, want about %v (stored block %v)", o, k, got, exp, want[k])
					break
				}
			}
		}
	}
}

func TestAnimatedGIF(t *testing.T) {
	frames := &gif.GIF{}
	for i := 0; i < 3; i++ {
		f := image.NewPaletted(image.Rect(0, 0, 8, 8), palette6())
		for j := range f.Pix {
			f.Pix[j] = uint8(i)
		}
		frames.Image = append(frames.Image, f)
		frames.Delay = append(frames.Delay, 10)
	}
	data := encodeWith(t, func(b *bytes.Buffer) error { return gif.EncodeAll(b, frames) })
	img, info, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if info.Frames != 3 || !strings.Contains(info.Note, "first of its 3 frames") {
		t.Errorf("info %+v", info)
	}
	if !bytes.Equal(img.Pix[:3], []uint8{220, 30, 30}) {
		t.Errorf("first pixel %v: not the first frame's colour", img.Pix[:3])
	}
}

func TestRefusedFormats(t *testing.T) {
	img, _, err := Decode(readTestdata(t, "small.heic"))
	if runtime.GOOS == "darwin" {
		// ImageIO reads it: image2.png at HEIC quality 60.
		if err != nil {
			t.Fatalf("HEIC on macOS: %v", err)
		}
		ref, _, err := DecodeFile(filepath.Join("testdata", "image2.png"))
		if err != nil {
			t.Fatal(err)
		}
		if d := meanAbsDiff(t, img, ref); d > 12 {
			t.Errorf("HEIC differs from its PNG by %.3g levels on average (bound 12, quality 60)", d)
		}
	} else if !errors.Is(err, ErrHEIC) || !strings.Contains(err.Error(), "convert it to JPEG or PNG") {
		t.Errorf("HEIC: %v", err)
	}
	for _, data := range [][]byte{nil, []byte("hello"), []byte("%PDF-1.7\n"), bytes.Repeat([]byte{0}, 100)} {
		if _, _, err := Decode(data); !errors.Is(err, ErrFormat) {
			t.Errorf("%q: %v, want ErrFormat", data, err)
		}
	}
}

// TestTruncatedAndCorrupt cuts every format's sample short at several
// points and overwrites bytes in its middle: each is read or refused with
// an error naming the format and saying what to do, never a panic.
func TestTruncatedAndCorrupt(t *testing.T) {
	for format, data := range samples(t) {
		name := formatName(format)
		for _, n := range []int{len(data) / 8, len(data) / 2, len(data) - len(data)/10} {
			if n < 4 {
				continue
			}
			_, _, err := Decode(data[:n])
			if format == "tiff" && err == nil {
				// TIFF's directory is at the end; a cut before it may still
				// read the strips.
				continue
			}
			if err == nil {
				t.Errorf("%s cut to %d of %d bytes: no error", format, n, len(data))
				continue
			}
			if !strings.Contains(err.Error(), name) || !(strings.Contains(err.Error(), "cut short") || strings.Contains(err.Error(), "damaged")) {
				t.Errorf("%s cut to %d bytes: unclear error %q", format, n, err)
			}
		}
		for _, at := range []int{16, len(data) / 3, len(data) / 2} {
			bad := bytes.Clone(data)
			for i := at; i < at+16 && i < len(bad); i++ {
				bad[i] ^= 0x5a
			}
			img, info, err := Decode(bad)
			switch {
			case err != nil:
				if !strings.Contains(err.Error(), name) && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTooLarge) {
					t.Errorf("%s corrupted at %d: unclear error %q", format, at, err)
				}
			case img.Width != info.Width || img.Height != info.Height || len(img.Pix) != 3*img.Width*img.Height:
				t.Errorf("%s corrupted at %d: image %d × %d (%d bytes) against info %d × %d", format, at, img.Width, img.Height, len(img.Pix), info.Width, info.Height)
			}
		}
	}
}

func TestSmartResize(t *testing.T) {
	cfg := Qwen36Config()
	for _, c := range []struct{ h, w, wh, ww int }{
		{240, 320, 256, 320},     // 7.5 rounds to 8 (half to even)
		{500, 150, 512, 160},     // as the fixture's tall image
		{64, 64, 256, 256},       // below the minimum: scaled up
		{3024, 4032, 3008, 4032}, // 94.5 rounds to 94, within the checkpoint's limit
		{1, 150, 32, 3136},       // a 1-pixel strip: rounds to no height, then scaled up
	} {
		h, w, err := cfg.SmartResize(c.h, c.w)
		if err != nil || h != c.wh || w != c.ww {
			t.Errorf("SmartResize(%d, %d) = %d, %d, %v; want %d, %d", c.h, c.w, h, w, err, c.wh, c.ww)
		}
	}
	// Half to even: 80/32 = 2.5 rounds to 2 (64), not 3 (96). (The
	// expected sizes here are Python's smart_resize's, run on the same
	// arguments.)
	small := cfg
	small.MinPixels = 32 * 32
	if h, w, _ := small.SmartResize(80, 80); h != 64 || w != 64 {
		t.Errorf("SmartResize(80, 80) = %d, %d; want 64, 64 (Python rounds half to even)", h, w)
	}
	if _, _, err := cfg.SmartResize(10, 2010); err == nil || !strings.Contains(err.Error(), "200") {
		t.Errorf("aspect ratio 201: %v", err)
	}
}

func TestTokenCostDefault(t *testing.T) {
	cfg := Qwen36Config().WithMaxPixels(DefaultMaxPixels)
	for _, c := range []struct{ w, h, tokens int }{
		{4032, 3024, 1230}, // a 12 MP phone photo: 1312 × 960
		{3024, 4032, 1230}, // the same, upright
		{2880, 1800, 1260}, // a Retina screenshot: 1440 × 896
		{320, 240, 80},     // small images are not enlarged beyond the minimum
	} {
		n, err := cfg.TokenCost(c.w, c.h)
		if err != nil || n != c.tokens {
			t.Errorf("TokenCost(%d, %d) = %d, %v; want %d", c.w, c.h, n, err, c.tokens)
		}
	}
	full := Qwen36Config()
	if n, _ := full.TokenCost(4032, 3024); n < 10000 {
		t.Errorf("the checkpoint's own limit gives %d tokens for a 12 MP photo", n)
	} else {
		t.Logf("a 12 MP photo: %d tokens at the checkpoint's limit, 1230 at DefaultMaxPixels", n)
	}
	if got := full.WithMaxPixels(100).MaxPixels; got != full.MinPixels {
		t.Errorf("WithMaxPixels below the minimum: %d", got)
	}
}

func TestDecodeErrorsNameTheLimit(t *testing.T) {
	data := rawPNG(30000, 30000, 2, 8, nil)
	_, _, err := Decode(data)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "30000 × 30000") || !strings.Contains(err.Error(), fmt.Sprintf("%.0f megapixels", float64(MaxDecodePixels)/1e6)) {
		t.Errorf("30000 × 30000 PNG: %v", err)
	}
	if _, err := Probe(data); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Probe: %v", err)
	}
}

// TestWebPAsLibwebp: lossy WebP files of odd and even sizes decode to
// libwebp's own output (ImageMagick's decode, testdata/README.md) sample
// for sample: the chroma upsampling and the colour conversion are
// libwebp's, as PIL's.
func TestWebPAsLibwebp(t *testing.T) {
	for _, name := range []string{"odd", "even"} {
		img, _, err := DecodeFile(filepath.Join("testdata", name+".webp"))
		if err != nil {
			t.Fatal(err)
		}
		ref, _, err := DecodeFile(filepath.Join("testdata", name+"-libwebp.png"))
		if err != nil {
			t.Fatal(err)
		}
		if d := meanAbsDiff(t, img, ref); d != 0 {
			t.Errorf("%s.webp: %.3f levels from libwebp's decode on average", name, d)
		}
	}
}

// TestJPEGAsLibjpeg: 63 × 47 JPEG files at 4:2:0, 4:2:2 and 4:4:4 decode
// to libjpeg-turbo's output (ImageMagick's decode, testdata/README.md)
// within its inverse DCT: image/jpeg's IDCT rounds differently from
// libjpeg's islow here and there (measured: mean under 0.05 levels, at
// most 3), while the chroma upsampling and colour conversion are
// libjpeg's. With image/jpeg's nearest chroma sample the 4:2:0 file is
// about 3 levels off on average and up to ~90 at colour edges.
func TestJPEGAsLibjpeg(t *testing.T) {
	for _, name := range []string{"j420", "j422", "j444"} {
		img, _, err := DecodeFile(filepath.Join("testdata", name+".jpg"))
		if err != nil {
			t.Fatal(err)
		}
		ref, _, err := DecodeFile(filepath.Join("testdata", name+"-libjpeg.png"))
		if err != nil {
			t.Fatal(err)
		}
		mean := meanAbsDiff(t, img, ref)
		worst := 0.0
		for i := range img.Pix {
			worst = max(worst, math.Abs(float64(img.Pix[i])-float64(ref.Pix[i])))
		}
		t.Logf("%s: mean %.3f, max %.0f levels from libjpeg", name, mean, worst)
		if mean > 0.1 || worst > 4 {
			t.Errorf("%s.jpg: %.3f levels from libjpeg's decode on average, %.0f at most (bounds 0.1, 4)", name, mean, worst)
		}
	}
}

// handGIF writes an 8 × 8 GIF with a global table of four colours whose
// first frame covers (2,2)-(6,6), index 1 marked transparent: what PIL
// shows is the palette's colour under transparent pixels, and the
// transparent index's colour outside the frame.
func handGIF(t *testing.T) []byte {
	var b bytes.Buffer
	b.WriteString("GIF89a")
	binary.Write(&b, binary.LittleEndian, []uint16{8, 8})
	b.Write([]byte{0x81, 0, 0}) // global table of 4 entries
	b.Write([]byte{10, 20, 30, 200, 100, 50, 0, 255, 0, 255, 255, 255})
	b.Write([]byte{0x21, 0xf9, 4, 1, 0, 0, 1, 0}) // transparent index 1
	b.Write([]byte{0x2c})
	binary.Write(&b, binary.LittleEndian, []uint16{2, 2, 4, 4})
	b.WriteByte(0)
	b.WriteByte(2) // LZW minimum code size
	var z bytes.Buffer
	lw := lzw.NewWriter(&z, lzw.LSB, 2)
	lw.Write([]byte{0, 1, 2, 3, 1, 1, 2, 2, 3, 3, 0, 0, 1, 2, 3, 0})
	lw.Close()
	b.WriteByte(byte(z.Len()))
	b.Write(z.Bytes())
	b.Write([]byte{0, 0x3b})
	return b.Bytes()
}

func TestGIFAsPIL(t *testing.T) {
	img, info, err := Decode(handGIF(t))
	if err != nil {
		t.Fatal(err)
	}
	if img.Width != 8 || img.Height != 8 || info.Width != 8 {
		t.Fatalf("%d × %d, info %+v: not the logical screen", img.Width, img.Height, info)
	}
	at := func(x, y int) []uint8 { return img.Pix[3*(8*y+x):][:3] }
	for _, c := range []struct {
		x, y int
		want []uint8
	}{
		{0, 0, []uint8{200, 100, 50}}, // outside the frame: the transparent index's colour
		{2, 2, []uint8{10, 20, 30}},   // index 0
		{3, 2, []uint8{200, 100, 50}}, // index 1, transparent: its palette colour
		{5, 2, []uint8{255, 255, 255}},
		{7, 7, []uint8{200, 100, 50}},
	} {
		if got := at(c.x, c.y); !bytes.Equal(got, c.want) {
			t.Errorf("(%d,%d): %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
