// Package assets holds the images the app ships, embedded in the binary.
//
// The PNGs in icons/ are rendered from the SVGs beside them
// (`rsvg-convert -w 44 -h 44 tray-template.svg -o tray-template.png`, and
// 1024×1024 for appicon.png); edit the SVG and render again rather than
// editing a PNG.
package assets

import _ "embed"

// TrayTemplate is the menu-bar icon for macOS: black on transparent, which
// macOS recolours for light and dark menu bars. 44×44 for 22 pt at 2×.
//
//go:embed icons/tray-template.png
var TrayTemplate []byte

// TrayColor is the tray icon for Linux panels, which show icons as they are.
//
//go:embed icons/tray-color.png
var TrayColor []byte

// AppIcon is the 1024×1024 application icon: the window icon on Linux and
// the source of the macOS bundle's .icns.
//
//go:embed icons/appicon.png
var AppIcon []byte
