// Package release tests the release scripts of build/macos and build/linux
// on the machine at hand: the macOS bundle and disk image through a dry run
// of build/macos/make-app.sh (the bundle and the image's folder are made for
// real, the macOS commands are printed and checked), the entitlements file,
// and the Debian package, built, validated and unpacked into a scratch root.
//
// The package has no code of its own; make release-check runs its tests.
// It sits under app/internal to read Info.plist with app/internal/bundle.
package release
