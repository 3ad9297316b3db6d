// Command mslunits writes the MSL translation units the Metal device
// compiles — the exact text newLibraryWithSource receives, from
// metal.TranslationUnits over the embedded kernels — one .metal file each,
// so that Apple's offline compiler can check them:
//
//	go run ./engine/gpu/metal/mslunits -out build/msl
//	for f in build/msl/*.metal; do
//	    xcrun -sdk macosx metal -std=metal3.1 -Werror -c "$f" -o "${f%.metal}.air"
//	done
//
// The macOS workflow runs this on every push. It builds on any system.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/suzuran-app/suzuran/engine/gpu/metal"
	"github.com/suzuran-app/suzuran/metalkernels"
)

func main() {
	out := flag.String("out", "", "folder to write the translation units into (created if missing)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: mslunits -out DIR")
		os.Exit(2)
	}
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "mslunits:", err)
		os.Exit(1)
	}
}

// write puts every unit into dir under its .metal file's base name.
func write(dir string) error {
	units, err := metal.TranslationUnits(metalkernels.Sources(), "metalkernels/")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, u := range units {
		path := filepath.Join(dir, filepath.Base(u.Name))
		if err := os.WriteFile(path, []byte(u.Text), 0o644); err != nil {
			return err
		}
		fmt.Println(path)
	}
	return nil
}
