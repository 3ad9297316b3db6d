#!/usr/bin/env bash
# make app: build/macos/make-app.sh [--dry-run] [--binary bin/suzuran] [--out-dir bin]
#
# Runs the release steps in order, each a script beside this one that can
# also be run alone:
#
#   bundle.sh    OUT/Suzuran.app from the binary (make build)
#   kernels.sh   the GPU kernels compiled ahead (xcrun metal, -Werror, per
#                file; xcrun metallib) into Contents/Resources
#   sign.sh      hardened runtime, entitlements.plist; Developer ID with
#                SUZURAN_SIGN_IDENTITY, ad hoc without
#   dmg.sh       OUT/Suzuran-VERSION.dmg with an Applications link and a background
#   notarize.sh  notarytool and stapler, when credentials are in the
#                environment (its top says which); skipped, with a note, if not
#
# --dry-run runs on any system: it makes the bundle and the image's staging
# folder (OUT/dmg-staging) for real and prints every macOS command instead of
# running it. make release-check tests the bundle this way on Linux.
set -euo pipefail
here=$(dirname "$0")
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

binary=bin/suzuran
out=bin
while [ $# -gt 0 ]; do
	case "$1" in
	--dry-run) export DRY_RUN=1; shift ;;
	--binary) binary=${2:?}; shift 2 ;;
	--out-dir) out=${2:?}; shift 2 ;;
	*) fail "unknown argument $1 (usage: make-app.sh [--dry-run] [--binary FILE] [--out-dir DIR])" ;;
	esac
done
need_macos

version=$(project_version)
app=$out/Suzuran.app
dmg=$out/Suzuran-$version.dmg
if [ "$DRY_RUN" = 1 ]; then
	export DMG_STAGING=$out/dmg-staging
fi

"$here/bundle.sh" --binary "$binary" --out "$app"
"$here/kernels.sh" --app "$app"
"$here/sign.sh" "$app"
"$here/dmg.sh" "$app" "$dmg"
if [ -z "${SUZURAN_SIGN_IDENTITY:-}" ]; then
	note "not notarising: the app is signed ad hoc (set SUZURAN_SIGN_IDENTITY to a Developer ID to notarise)"
elif ! "$here/notarize.sh" --has-credentials; then
	note "not notarising: no notary credentials in the environment (build/macos/notarize.sh says which)"
else
	"$here/notarize.sh" "$dmg"
fi
note "Suzuran $version: $app, $dmg"
