#!/usr/bin/env bash
# Step 3 of make app: build/macos/dmg.sh [bin/Suzuran.app] [bin/Suzuran-VERSION.dmg]
#
# Makes the disk image a user downloads: the app, a link to /Applications to
# drag it onto, and a background that says so (dmg-background.svg, rendered
# to the two PNGs beside it). Finder lays the window out through AppleScript;
# where Finder cannot be scripted (a Mac without a logged-in session, or one
# that refuses the automation prompt) the image is made without the layout,
# with a warning. hdiutil create and convert are run again while they fail
# with "Resource busy" (retry_busy in lib.sh). With SUZURAN_SIGN_IDENTITY the
# image is signed too.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

app=${1:-bin/Suzuran.app}
version=$(project_version)
dmg=${2:-bin/Suzuran-$version.dmg}
name=$(basename "$app" .app)
need_macos
need_tool hdiutil "hdiutil comes with macOS"
[ -d "$app" ] || fail "$app does not exist: run build/macos/bundle.sh and sign.sh first"

# The staging folder is the image's content; under DRY_RUN=1 it is kept
# (DMG_STAGING names it) so that its layout can be checked.
staging=${DMG_STAGING:-$(mktemp -d)}
rw=$(mktemp -u).dmg # the writable image Finder lays out, converted at the end
mount=
cleanup() {
	if [ -n "$mount" ] && [ -d "$mount" ]; then hdiutil detach -force "$mount" >/dev/null 2>&1 || true; fi
	if [ "$DRY_RUN" != 1 ]; then rm -f "$rw"; fi
	if [ -z "${DMG_STAGING:-}" ]; then rm -rf "$staging"; fi
}
trap cleanup EXIT
mkdir -p "$staging/.background"
rm -rf "${staging:?}/$name.app"
if [ "$(uname)" = Darwin ]; then
	ditto "$app" "$staging/$name.app" # keeps the signature's extended attributes
else
	cp -a "$app" "$staging/$name.app"
fi
ln -sfn /Applications "$staging/Applications"
cp "$repo/build/macos/dmg-background.png" "$repo/build/macos/dmg-background@2x.png" "$staging/.background/"
# One TIFF with both resolutions, so that Retina screens get the sharp one.
run tiffutil -cathidpicheck "$staging/.background/dmg-background.png" "$staging/.background/dmg-background@2x.png" \
	-out "$staging/.background/background.tiff"

volume="$name $version"
if [ "$DRY_RUN" != 1 ] && [ -e "/Volumes/$volume" ]; then
	fail "/Volumes/$volume is already mounted (an earlier image?): eject it in Finder, or run hdiutil detach \"/Volumes/$volume\", and run this again"
fi
retry_busy hdiutil create -quiet -srcfolder "$staging" -volname "$volume" -fs HFS+ -format UDRW -ov "$rw"
mount=/Volumes/$volume
run hdiutil attach -quiet -readwrite -noverify -noautoopen -mountpoint "$mount" "$rw"

# Window 660×400 (the background's size; the bounds add the title bar) at
# (200,120); icons 128 px, the app at (165,180) and Applications at
# (495,180), the places the arrow joins.
layout() {
	osascript <<APPLESCRIPT
with timeout of 60 seconds
	tell application "Finder"
		tell disk "$volume"
			open
			set current view of container window to icon view
			set toolbar visible of container window to false
			set statusbar visible of container window to false
			set bounds of container window to {200, 120, 860, 548}
			set viewOptions to the icon view options of container window
			set arrangement of viewOptions to not arranged
			set icon size of viewOptions to 128
			set background picture of viewOptions to file ".background:background.tiff"
			set position of item "$name.app" of container window to {165, 180}
			set position of item "Applications" of container window to {495, 180}
			close
			open
			update without registering applications
			delay 1
			close
		end tell
	end tell
end timeout
APPLESCRIPT
}
if [ "$DRY_RUN" = 1 ]; then
	echo "+ osascript (Finder: icon view, background .background/background.tiff, $name.app at 165,180, Applications at 495,180)"
elif ! layout; then
	note "warning: Finder could not lay out the window (above); the image still has the app, the Applications link and the background file"
fi
run sync
# Finder may hold the volume for a moment after closing its window.
detach() {
	local try
	for try in 1 2 3 4 5; do
		hdiutil detach -quiet "$mount" && return 0
		note "the volume is busy; trying again ($try of 5)"
		sleep 2
	done
	hdiutil detach -force "$mount"
}
if [ "$DRY_RUN" = 1 ]; then
	run hdiutil detach -quiet "$mount"
else
	detach
fi
mount=
mkdir -p "$(dirname "$dmg")"
retry_busy hdiutil convert -quiet "$rw" -format UDZO -imagekey zlib-level=9 -ov -o "$dmg"
if [ -n "${SUZURAN_SIGN_IDENTITY:-}" ]; then
	run codesign --force --timestamp --sign "$SUZURAN_SIGN_IDENTITY" "$dmg"
fi
note "wrote $dmg"
