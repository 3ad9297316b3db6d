// Package frontend hands the built chat UI to the Go side.
//
// `npm run build` (run by `make build`) writes the Svelte app into dist/;
// the desktop window serves those files from this embedded copy, so the
// binary needs nothing beside it at run time. The folder holds a committed
// .gitkeep so that a fresh clone compiles before the first frontend build.
package frontend

import (
	"embed"
	"errors"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// ErrNotBuilt says the binary was compiled before the frontend was built.
var ErrNotBuilt = errors.New("the chat UI was not built into this binary: run `make build` (it runs `npm run build` in frontend/) and build again")

// Dist returns the built frontend with index.html at its root, or
// ErrNotBuilt when dist/ held no index.html at compile time.
func Dist() (fs.FS, error) {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, err
	}
	if _, err := fs.Stat(sub, "index.html"); err != nil {
		return nil, ErrNotBuilt
	}
	return sub, nil
}
