#!/usr/bin/env bash
# Step 4 of make app: build/macos/notarize.sh [bin/Suzuran-VERSION.dmg]
#
# Sends the signed image to Apple's notary service with notarytool, waits
# for the verdict, and staples the ticket to the image, so that Gatekeeper
# accepts the app without asking, offline too. The app in the image must be
# signed with a Developer ID (sign.sh with SUZURAN_SIGN_IDENTITY). The
# credentials are one of:
#
#   SUZURAN_NOTARY_PROFILE   a keychain profile made once with
#                            `xcrun notarytool store-credentials NAME`
#   APPLE_API_KEY_PATH, APPLE_API_KEY_ID, APPLE_API_ISSUER
#                            an App Store Connect API key (.p8 file)
#   APPLE_ID, APPLE_TEAM_ID, APPLE_APP_PASSWORD
#                            an Apple ID with an app-specific password
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

dmg=${1:-bin/Suzuran-$(project_version).dmg}

# notary_auth prints notarytool's credential flags, one a line, or fails.
notary_auth() {
	if [ -n "${SUZURAN_NOTARY_PROFILE:-}" ]; then
		printf '%s\n' --keychain-profile "$SUZURAN_NOTARY_PROFILE"
	elif [ -n "${APPLE_API_KEY_PATH:-}" ] && [ -n "${APPLE_API_KEY_ID:-}" ] && [ -n "${APPLE_API_ISSUER:-}" ]; then
		printf '%s\n' --key "$APPLE_API_KEY_PATH" --key-id "$APPLE_API_KEY_ID" --issuer "$APPLE_API_ISSUER"
	elif [ -n "${APPLE_ID:-}" ] && [ -n "${APPLE_TEAM_ID:-}" ] && [ -n "${APPLE_APP_PASSWORD:-}" ]; then
		printf '%s\n' --apple-id "$APPLE_ID" --team-id "$APPLE_TEAM_ID" --password "$APPLE_APP_PASSWORD"
	else
		return 1
	fi
}

# has_credentials is make-app.sh's question: can this step run?
if [ "${1:-}" = --has-credentials ]; then
	notary_auth >/dev/null
	exit
fi

# (A loop, not mapfile: macOS ships bash 3.2.)
auth=()
while IFS= read -r flag; do auth+=("$flag"); done < <(notary_auth || true)
[ "${#auth[@]}" -gt 0 ] || fail "no notarisation credentials: set SUZURAN_NOTARY_PROFILE, or APPLE_API_KEY_PATH + APPLE_API_KEY_ID + APPLE_API_ISSUER, or APPLE_ID + APPLE_TEAM_ID + APPLE_APP_PASSWORD (see the top of this script)"
need_macos
need_tool xcrun "install the Xcode command line tools: xcode-select --install"
[ -f "$dmg" ] || [ "$DRY_RUN" = 1 ] || fail "$dmg does not exist: run build/macos/dmg.sh first"

note "sending $dmg to Apple's notary service (this takes minutes)"
if [ "$DRY_RUN" = 1 ]; then
	run xcrun notarytool submit "$dmg" --wait --output-format plist "${auth[@]}"
else
	verdict=$(mktemp)
	trap 'rm -f "$verdict"' EXIT
	if ! xcrun notarytool submit "$dmg" --wait --output-format plist "${auth[@]}" >"$verdict"; then
		cat "$verdict" >&2
		fail "notarytool submit failed (above): check the credentials and that the app is signed with a Developer ID"
	fi
	status=$(plutil -extract status raw -o - "$verdict") || fail "notarytool's answer has no status: $(cat "$verdict")"
	id=$(plutil -extract id raw -o - "$verdict")
	if [ "$status" != Accepted ]; then
		xcrun notarytool log "$id" "${auth[@]}" >&2 || true
		fail "Apple's notary service answered $status for submission $id (its log is above)"
	fi
	note "accepted: submission $id"
fi
run xcrun stapler staple "$dmg"
run xcrun stapler validate "$dmg"
run spctl --assess --type open --context context:primary-signature --verbose=2 "$dmg"
