#!/usr/bin/env bash
# Step 2 of make app: build/macos/sign.sh [bin/Suzuran.app]
#
# Signs the bundle with the hardened runtime and build/macos/entitlements.plist
# (which says why Suzuran needs no entitlement). The identity is
# SUZURAN_SIGN_IDENTITY, a "Developer ID Application: NAME (TEAMID)"
# certificate in the keychain (`security find-identity -v -p codesigning`
# lists them). Without it the bundle is signed ad hoc: it runs on this Mac,
# and on another only after right-click → Open (the README says more), and it
# cannot be notarised.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

app=${1:-bin/Suzuran.app}
need_macos
need_tool codesign "install the Xcode command line tools: xcode-select --install"
[ -d "$app" ] || [ "$DRY_RUN" = 1 ] || fail "$app does not exist: run build/macos/bundle.sh first"

entitlements=$repo/build/macos/entitlements.plist
identity=${SUZURAN_SIGN_IDENTITY:-}
flags=(--force --options runtime --entitlements "$entitlements")
if [ -n "$identity" ]; then
	if [ "$DRY_RUN" != 1 ] && ! security find-identity -v -p codesigning | grep -qF -- "$identity"; then
		fail "SUZURAN_SIGN_IDENTITY is \"$identity\", which is not a signing identity in the keychain; security find-identity -v -p codesigning lists those there (or unset it to sign ad hoc)"
	fi
	note "signing $app as $identity"
	# A secure timestamp is what notarisation asks of a Developer ID signature.
	flags+=(--timestamp --sign "$identity")
else
	note "SUZURAN_SIGN_IDENTITY is not set: signing $app ad hoc (fine on this Mac; not for others, and not notarisable)"
	flags+=(--sign -)
fi
# One executable and no nested code, so signing the bundle signs it all;
# --deep is not needed (and Apple advises against it).
run codesign "${flags[@]}" "$app"
run codesign --verify --strict --verbose=2 "$app"
run codesign --display --entitlements - "$app"
