// Command mkapp makes Suzuran.app from the built binary (make app):
//
//	go run ./app/internal/bundle/mkapp -binary bin/suzuran -o bin/Suzuran.app
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/suzuran-app/suzuran/app/internal/bundle"
)

func main() {
	binary := flag.String("binary", "bin/suzuran", "the built macOS binary")
	wailsJSON := flag.String("wails", "wails.json", "the project file with the app's name, bundle id, version and copyright")
	tmpl := flag.String("template", "Info.plist.tmpl", "the Info.plist template")
	icon := flag.String("icon", "assets/icons/appicon.png", "the 1024×1024 app icon")
	out := flag.String("o", "bin/Suzuran.app", "the bundle to write (replaced if present)")
	flag.Parse()
	if err := run(*binary, *wailsJSON, *tmpl, *icon, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkapp:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", *out)
}

func run(binary, wailsJSON, tmplPath, iconPath, out string) error {
	meta, err := bundle.LoadMeta(wailsJSON)
	if err != nil {
		return err
	}
	tmpl, err := os.ReadFile(tmplPath)
	if err != nil {
		return err
	}
	icon, err := os.ReadFile(iconPath)
	if err != nil {
		return err
	}
	return bundle.Assemble(bundle.Options{
		Binary:   binary,
		Template: string(tmpl),
		Meta:     meta,
		IconPNG:  icon,
		Out:      out,
	})
}
