package metal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Where a device's kernels came from (Device.Library).
const (
	// LibraryBundled is the app bundle's precompiled library:
	// build/macos/kernels.sh compiles every .metal file with Apple's
	// offline compiler (xcrun metal, -Werror) and links them with xcrun
	// metallib into Contents/Resources/<BundledLibraryName>.
	LibraryBundled = "bundled"
	// LibraryCompiled is the embedded sources compiled at run time
	// (newLibraryWithSource): the fallback when the bundle has no library
	// for these sources, or its library does not load.
	LibraryCompiled = "compiled"
)

// LibraryEnv overrides where the precompiled library is looked for: a
// path to a .metallib, or "none" to compile the sources at run time
// (`make mac-check` compares both ways).
const LibraryEnv = "SUZURAN_METALLIB"

// SourcesDigest identifies a set of kernel sources: the first 16 hex
// digits of the SHA-256 of every file, in byte order of their names, each
// as its name, a newline and its text. build/macos/kernels.sh computes the
// same digest in shell, so the library it bundles is named after the
// sources it was built from, and a binary only ever loads a library built
// from its own embedded sources.
func SourcesDigest(sources map[string]string) string {
	names := make([]string, 0, len(sources))
	for n := range sources {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\n%s", n, sources[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// BundledLibraryName is the file name of the precompiled library for these
// sources: "kernels-<SourcesDigest>.metallib".
func BundledLibraryName(sources map[string]string) string {
	return "kernels-" + SourcesDigest(sources) + ".metallib"
}

// BundledLibraryPath is where the precompiled library for sources lies when
// exe is the app bundle's executable (Suzuran.app/Contents/MacOS/suzuran):
// Contents/Resources/BundledLibraryName. LibraryEnv overrides it ("" for
// "none"). The file may not exist: a binary outside a bundle compiles its
// sources.
func BundledLibraryPath(exe string, sources map[string]string) string {
	switch v := os.Getenv(LibraryEnv); v {
	case "":
	case "none":
		return ""
	default:
		return v
	}
	if exe == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(filepath.Dir(exe)), "Resources", BundledLibraryName(sources))
}

// libraryChoice loads a device's kernels once: the bundled library when
// there is one and it loads, else the sources compiled. The outcome is
// kept — the library, or the compile's error, since neither the bundle
// nor the embedded sources change while the app runs — so that every
// pipeline after the first costs nothing here.
type libraryChoice struct {
	done   bool
	source string // LibraryBundled or LibraryCompiled once loaded
	// bundledErr says why the bundled library was not used although it
	// exists (it did not load); err is the compile's error.
	bundledErr error
	err        error
}

// load runs the choice on first use: loadBundled(path) when bundled names
// a file that exists, compile() when there is none or it fails.
func (c *libraryChoice) load(bundled string, loadBundled func(path string) error, compile func() error) error {
	if c.done {
		return c.err
	}
	c.done = true
	if bundled != "" {
		if _, err := os.Stat(bundled); err == nil {
			if c.bundledErr = loadBundled(bundled); c.bundledErr == nil {
				c.source = LibraryBundled
				return nil
			}
		}
	}
	if c.err = compile(); c.err != nil {
		if c.bundledErr != nil {
			c.err = fmt.Errorf("%w (the bundled library %s did not load either: %v)", c.err, bundled, c.bundledErr)
		}
		return c.err
	}
	c.source = LibraryCompiled
	return nil
}
