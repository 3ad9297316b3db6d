#!/usr/bin/env bash
# Step 1b of make app: build/macos/kernels.sh [--app bin/Suzuran.app]
#
# Compiles the GPU kernels ahead of time into the bundle, so that the app
# does not compile them from source at its first start:
#
#   xcrun metal     each metalkernels/*.metal file on its own, at MSL 3.1
#                   for macOS 14 (what the app compiles at run time), with
#                   -Werror: a warning stops the build
#   xcrun metallib  the files' .air into one library,
#                   Suzuran.app/Contents/Resources/kernels-DIGEST.metallib
#
# DIGEST names the sources the library was built from (the first 16 hex
# digits of the SHA-256 of every metalkernels/*.metal and *.h file, in byte
# order of their names, each as its name, a newline and its text: what
# engine/gpu/metal's SourcesDigest computes from the sources embedded in the
# binary). A binary loads only the library of its own sources, and compiles
# them at run time when the bundle has none or it does not load.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

app=bin/Suzuran.app
while [ $# -gt 0 ]; do
	case "$1" in
	--app) app=${2:?}; shift 2 ;;
	*) fail "unknown argument $1 (usage: kernels.sh [--app DIR.app])" ;;
	esac
done
need_tool xcrun "install Xcode (the Metal compiler comes with it; the command line tools alone lack it), or run xcodebuild -downloadComponent MetalToolchain"
[ -d "$app/Contents" ] || fail "$app is not an app bundle: run build/macos/bundle.sh first"

src=$repo/metalkernels
# sha256 prints a digest of its input, with shasum (macOS) or sha256sum.
sha256() {
	if command -v shasum >/dev/null; then shasum -a 256; else sha256sum; fi | cut -d' ' -f1
}
files=$(cd "$src" && for f in *.metal *.h; do echo "$f"; done | LC_ALL=C sort)
digest=$(cd "$src" && for f in $files; do printf '%s\n' "$f"; cat "$f"; done | sha256 | cut -c1-16)
library=$app/Contents/Resources/kernels-$digest.metallib

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
airs=()
for f in $files; do
	case "$f" in *.metal) ;; *) continue ;; esac
	air=$work/${f%.metal}.air
	run xcrun -sdk macosx metal -std=metal3.1 -mmacosx-version-min=14.0 -Werror -I "$src" -c "$src/$f" -o "$air"
	airs+=("$air")
done
[ ${#airs[@]} -gt 0 ] || fail "no .metal files in $src"
mkdir -p "$app/Contents/Resources"
rm -f "$app"/Contents/Resources/kernels-*.metallib
run xcrun -sdk macosx metallib "${airs[@]}" -o "$library"
note "${#airs[@]} kernel files compiled into $library"
