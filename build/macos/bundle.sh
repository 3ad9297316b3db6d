#!/usr/bin/env bash
# Step 1 of make app: build/macos/bundle.sh [--binary bin/suzuran] [--out bin/Suzuran.app]
#
# Makes the app bundle from the built arm64 binary (make build on a Mac):
#
#   Suzuran.app/Contents/Info.plist             Info.plist.tmpl filled from wails.json
#   Suzuran.app/Contents/PkgInfo
#   Suzuran.app/Contents/MacOS/suzuran          the binary
#   Suzuran.app/Contents/Resources/appicon.icns every size from 16 to 1024 px
#
# The work is app/internal/bundle's (the mkapp command), which runs anywhere;
# on a Mac this step also checks that the binary is an arm64 Mach-O program.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

binary=bin/suzuran
out=bin/Suzuran.app
while [ $# -gt 0 ]; do
	case "$1" in
	--binary) binary=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	*) fail "unknown argument $1 (usage: bundle.sh [--binary FILE] [--out DIR.app])" ;;
	esac
done
[ -f "$binary" ] || fail "$binary does not exist: build it first (make build)"

if [ "$(uname)" = Darwin ] && [ "$DRY_RUN" != 1 ]; then
	archs=$(lipo -archs "$binary" 2>/dev/null) || fail "$binary is not a Mach-O program"
	[[ " $archs " == *" arm64 "* ]] || fail "$binary is built for $archs; Suzuran needs arm64 (build on an Apple silicon Mac, or with GOARCH=arm64)"
fi

(cd "$repo" && go run ./app/internal/bundle/mkapp -binary "$(absolute "$binary")" -wails wails.json \
	-template Info.plist.tmpl -icon assets/icons/appicon.png -o "$(absolute "$out")")
