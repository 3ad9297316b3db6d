package metalkernels

import (
	"embed"
	"io/fs"
	"strings"
)

// FS holds the kernel sources: *.metal files and the *.h headers they
// include, at the root.
//
//go:embed *.metal *.h
var FS embed.FS

// Sources returns every kernel source and header by file name ("gemv.metal",
// "common.h"), the form both devices compile from. Each call returns a fresh
// map.
func Sources() map[string]string {
	out := map[string]string{}
	entries, err := fs.ReadDir(FS, ".")
	if err != nil {
		// The embedded tree is fixed at build time; reading its root
		// cannot fail.
		panic("metalkernels: reading embedded sources: " + err.Error())
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !(strings.HasSuffix(n, ".metal") || strings.HasSuffix(n, ".h")) {
			continue
		}
		b, err := FS.ReadFile(n)
		if err != nil {
			panic("metalkernels: reading embedded " + n + ": " + err.Error())
		}
		out[n] = string(b)
	}
	return out
}
