//go:build darwin

package metal

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego/objc"
)

// The classes and selectors the precompiled library needs, registered on
// first use (after loadSymbols has loaded Metal, which links Foundation).
var bundleObjc struct {
	once              sync.Once
	classNSURL        objc.Class
	fileURLWithPath   objc.SEL
	newLibraryWithURL objc.SEL
}

func loadBundleObjc() {
	bundleObjc.once.Do(func() {
		bundleObjc.classNSURL = objc.GetClass("NSURL")
		bundleObjc.fileURLWithPath = objc.RegisterName("fileURLWithPath:")
		bundleObjc.newLibraryWithURL = objc.RegisterName("newLibraryWithURL:error:")
	})
}

// bundledLibraryFor is where NewDefault looks for the precompiled library
// of sources: beside the running executable in its app bundle.
func bundledLibraryFor(sources map[string]string) string {
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	return BundledLibraryPath(exe, sources)
}

// loadLibraryFileLocked loads the precompiled library at path
// (newLibraryWithURL:error:) as the device's one library. It runs inside
// the caller's autorelease pool (the URL and the NSError are autoreleased).
func (d *Device) loadLibraryFileLocked(path string) error {
	loadBundleObjc()
	if bundleObjc.classNSURL == 0 {
		return errors.New("metal: the class NSURL is missing")
	}
	str := newNSString(path)
	url := sendID(objc.ID(bundleObjc.classNSURL), bundleObjc.fileURLWithPath, uintptr(str))
	send(str, selRelease)
	if url == 0 {
		return fmt.Errorf("metal: no file URL for %s", path)
	}
	var errObj objc.ID
	lib := sendID(d.dev, bundleObjc.newLibraryWithURL, uintptr(url), uintptr(unsafe.Pointer(&errObj)))
	if lib == 0 {
		return fmt.Errorf("metal: loading the precompiled library %s on %s: %w", path, d.name, nsError(errObj))
	}
	d.libraries = append(d.libraries, library{file: path, id: lib})
	return nil
}

// Library says where the device's kernels came from: LibraryBundled or
// LibraryCompiled once the first pipeline was built, "" before.
func (d *Device) Library() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.choice.source
}

// BundledLibraryError says why the bundle's precompiled library was not
// used although it exists (nil when it was, or when there is none).
func (d *Device) BundledLibraryError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.choice.bundledErr
}
