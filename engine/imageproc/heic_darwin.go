//go:build darwin

package imageproc

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// HEIC (HEIF) images are decoded by the system's ImageIO through purego:
// the size is read from the image's properties first and checked against
// the limit; then ImageIO makes the image upright (its
// kCGImageSourceCreateThumbnailWithTransform applies the file's
// orientation) at full size, and CoreGraphics draws it into an 8-bit sRGB
// buffer (Display P3 photos are converted; alpha, rare in HEIC, is drawn
// over black).

const (
	coreFoundationPath = "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation"
	imageIOPath        = "/System/Library/Frameworks/ImageIO.framework/ImageIO"
	coreGraphicsPath   = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"

	cfNumberSInt64Type       = 4 // kCFNumberSInt64Type
	cgImageAlphaNoneSkipLast = 5 // kCGImageAlphaNoneSkipLast: RGBX, 8 bits a sample
)

type cgRect struct{ X, Y, W, H float64 }

var heic struct {
	once sync.Once
	err  error

	cfDataCreate         func(alloc, bytes uintptr, length int) uintptr
	cfRelease            func(ref uintptr)
	cfDictionaryGetValue func(dict, key uintptr) uintptr
	cfDictionaryCreate   func(alloc, keys, values uintptr, count int, keyCallBacks, valueCallBacks uintptr) uintptr
	cfNumberGetValue     func(num uintptr, typ int, out unsafe.Pointer) bool
	cfNumberCreate       func(alloc uintptr, typ int, value unsafe.Pointer) uintptr

	sourceCreateWithData  func(data, options uintptr) uintptr
	sourceGetCount        func(src uintptr) int
	sourceCopyProperties  func(src uintptr, index int, options uintptr) uintptr
	sourceCreateThumbnail func(src uintptr, index int, options uintptr) uintptr
	imageGetWidth         func(img uintptr) int
	imageGetHeight        func(img uintptr) int
	colorSpaceCreateName  func(name uintptr) uintptr
	bitmapContextCreate   func(data uintptr, w, h, bitsPerComponent, bytesPerRow int, space uintptr, info uint32) uintptr
	contextDrawImage      func(ctx uintptr, rect cgRect, img uintptr)
	contextRelease        func(ctx uintptr)
	colorSpaceRelease     func(space uintptr)
	imageRelease          func(img uintptr)

	// Global constants, read from their symbols.
	keyCallBacks, valueCallBacks                      uintptr // addresses of the structs
	booleanTrue                                       uintptr
	pixelWidth, pixelHeight                           uintptr
	thumbFromAlways, thumbWithTransform, thumbMaxSize uintptr
	srgb                                              uintptr
}

func loadHEIC() error {
	heic.once.Do(func() {
		libs := map[string]uintptr{}
		for _, p := range []string{coreFoundationPath, coreGraphicsPath, imageIOPath} {
			lib, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err != nil {
				heic.err = fmt.Errorf("loading %s: %w", p, err)
				return
			}
			libs[p] = lib
		}
		cf, cg, io := libs[coreFoundationPath], libs[coreGraphicsPath], libs[imageIOPath]
		purego.RegisterLibFunc(&heic.cfDataCreate, cf, "CFDataCreate")
		purego.RegisterLibFunc(&heic.cfRelease, cf, "CFRelease")
		purego.RegisterLibFunc(&heic.cfDictionaryGetValue, cf, "CFDictionaryGetValue")
		purego.RegisterLibFunc(&heic.cfDictionaryCreate, cf, "CFDictionaryCreate")
		purego.RegisterLibFunc(&heic.cfNumberGetValue, cf, "CFNumberGetValue")
		purego.RegisterLibFunc(&heic.cfNumberCreate, cf, "CFNumberCreate")
		purego.RegisterLibFunc(&heic.sourceCreateWithData, io, "CGImageSourceCreateWithData")
		purego.RegisterLibFunc(&heic.sourceGetCount, io, "CGImageSourceGetCount")
		purego.RegisterLibFunc(&heic.sourceCopyProperties, io, "CGImageSourceCopyPropertiesAtIndex")
		purego.RegisterLibFunc(&heic.sourceCreateThumbnail, io, "CGImageSourceCreateThumbnailAtIndex")
		purego.RegisterLibFunc(&heic.imageGetWidth, cg, "CGImageGetWidth")
		purego.RegisterLibFunc(&heic.imageGetHeight, cg, "CGImageGetHeight")
		purego.RegisterLibFunc(&heic.colorSpaceCreateName, cg, "CGColorSpaceCreateWithName")
		purego.RegisterLibFunc(&heic.bitmapContextCreate, cg, "CGBitmapContextCreate")
		purego.RegisterLibFunc(&heic.contextDrawImage, cg, "CGContextDrawImage")
		purego.RegisterLibFunc(&heic.contextRelease, cg, "CGContextRelease")
		purego.RegisterLibFunc(&heic.colorSpaceRelease, cg, "CGColorSpaceRelease")
		purego.RegisterLibFunc(&heic.imageRelease, cg, "CGImageRelease")
		sym := func(lib uintptr, name string) uintptr {
			p, err := purego.Dlsym(lib, name)
			if err != nil && heic.err == nil {
				heic.err = fmt.Errorf("%s: %w", name, err)
			}
			return p
		}
		// The CFString and CFBoolean constants are variables holding the
		// object; the callback tables are structs whose address is passed.
		deref := func(p uintptr) uintptr {
			if p == 0 {
				return 0
			}
			return **(**uintptr)(unsafe.Pointer(&p))
		}
		heic.keyCallBacks = sym(cf, "kCFTypeDictionaryKeyCallBacks")
		heic.valueCallBacks = sym(cf, "kCFTypeDictionaryValueCallBacks")
		heic.booleanTrue = deref(sym(cf, "kCFBooleanTrue"))
		heic.pixelWidth = deref(sym(io, "kCGImagePropertyPixelWidth"))
		heic.pixelHeight = deref(sym(io, "kCGImagePropertyPixelHeight"))
		heic.thumbFromAlways = deref(sym(io, "kCGImageSourceCreateThumbnailFromImageAlways"))
		heic.thumbWithTransform = deref(sym(io, "kCGImageSourceCreateThumbnailWithTransform"))
		heic.thumbMaxSize = deref(sym(io, "kCGImageSourceThumbnailMaxPixelSize"))
		heic.srgb = deref(sym(cg, "kCGColorSpaceSRGB"))
	})
	return heic.err
}

var errHEICRead = errors.New("macOS could not read this HEIC image: open it in Preview and export it as JPEG or PNG")

// heicSource opens data as an ImageIO image source and reads the first
// image's pixel size; the caller releases the source.
func heicSource(data []byte) (src uintptr, w, h int, err error) {
	if err := loadHEIC(); err != nil {
		return 0, 0, 0, fmt.Errorf("HEIC images need macOS's ImageIO: %w", err)
	}
	if len(data) == 0 {
		return 0, 0, 0, errHEICRead
	}
	cfData := heic.cfDataCreate(0, uintptr(unsafe.Pointer(&data[0])), len(data)) // copies the bytes
	runtime.KeepAlive(data)
	if cfData == 0 {
		return 0, 0, 0, errHEICRead
	}
	defer heic.cfRelease(cfData)
	src = heic.sourceCreateWithData(cfData, 0)
	if src == 0 {
		return 0, 0, 0, errHEICRead
	}
	if heic.sourceGetCount(src) < 1 {
		heic.cfRelease(src)
		return 0, 0, 0, errHEICRead
	}
	props := heic.sourceCopyProperties(src, 0, 0)
	if props == 0 {
		heic.cfRelease(src)
		return 0, 0, 0, errHEICRead
	}
	defer heic.cfRelease(props)
	number := func(key uintptr) int {
		var v int64
		if n := heic.cfDictionaryGetValue(props, key); n != 0 && heic.cfNumberGetValue(n, cfNumberSInt64Type, unsafe.Pointer(&v)) {
			return int(v)
		}
		return 0
	}
	w, h = number(heic.pixelWidth), number(heic.pixelHeight)
	if w <= 0 || h <= 0 {
		heic.cfRelease(src)
		return 0, 0, 0, errHEICRead
	}
	return src, w, h, nil
}

func heicProbe(data []byte, limit int) (Info, error) {
	info := Info{Format: "heic", Frames: 1}
	src, w, h, err := heicSource(data)
	if err != nil {
		return info, err
	}
	heic.cfRelease(src)
	if int64(w)*int64(h) > int64(limit) {
		return info, fmt.Errorf("%w: the HEIC declares %d × %d pixels (%.1f megapixels), above the %.0f megapixels an image may have: export a smaller copy",
			ErrTooLarge, w, h, float64(w)*float64(h)/1e6, float64(limit)/1e6)
	}
	// The stored size: ImageIO turns the image upright as it decodes it,
	// and Decode's Info has the upright size (the token cost is the same
	// either way round).
	info.Width, info.Height = w, h
	return info, nil
}

func heicDecode(data []byte, info Info) (*RGB, error) {
	src, w, h, err := heicSource(data)
	if err != nil {
		return nil, err
	}
	defer heic.cfRelease(src)
	maxSide := int64(max(w, h))
	maxNum := heic.cfNumberCreate(0, cfNumberSInt64Type, unsafe.Pointer(&maxSide))
	if maxNum == 0 {
		return nil, errHEICRead
	}
	defer heic.cfRelease(maxNum)
	keys := []uintptr{heic.thumbFromAlways, heic.thumbWithTransform, heic.thumbMaxSize}
	values := []uintptr{heic.booleanTrue, heic.booleanTrue, maxNum}
	opts := heic.cfDictionaryCreate(0, uintptr(unsafe.Pointer(&keys[0])), uintptr(unsafe.Pointer(&values[0])), len(keys), heic.keyCallBacks, heic.valueCallBacks)
	runtime.KeepAlive(keys)
	runtime.KeepAlive(values)
	if opts == 0 {
		return nil, errHEICRead
	}
	defer heic.cfRelease(opts)
	img := heic.sourceCreateThumbnail(src, 0, opts)
	if img == 0 {
		return nil, errHEICRead
	}
	defer heic.imageRelease(img)
	ow, oh := heic.imageGetWidth(img), heic.imageGetHeight(img)
	if ow <= 0 || oh <= 0 || int64(ow)*int64(oh) > int64(w)*int64(h) {
		return nil, errHEICRead
	}
	space := heic.colorSpaceCreateName(heic.srgb)
	if space == 0 {
		return nil, errHEICRead
	}
	defer heic.colorSpaceRelease(space)
	buf := make([]uint8, 4*ow*oh)
	ctx := heic.bitmapContextCreate(uintptr(unsafe.Pointer(&buf[0])), ow, oh, 8, 4*ow, space, cgImageAlphaNoneSkipLast)
	if ctx == 0 {
		return nil, errHEICRead
	}
	heic.contextDrawImage(ctx, cgRect{W: float64(ow), H: float64(oh)}, img)
	heic.contextRelease(ctx)
	runtime.KeepAlive(buf)
	out := &RGB{Width: ow, Height: oh, Pix: make([]uint8, 3*ow*oh)}
	for i := 0; i < ow*oh; i++ {
		copy(out.Pix[3*i:3*i+3], buf[4*i:4*i+3])
	}
	return out, nil
}
