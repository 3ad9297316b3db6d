#!/usr/bin/env bash
# Desktop smoke test: build/smoke.sh bin/suzuran
#
# Runs the built app under a private X server (Xvfb) and a private D-Bus
# session, so it needs no desktop and leaves the caller's alone. The test
# itself (app/smoke_test.go) plays the tray host, finds and photographs the
# window, and quits the app from its tray menu. The screenshot is kept next
# to the binary as smoke.png.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(uname)" != Linux ]; then
	echo "smoke: the desktop smoke test needs Linux (Xvfb, D-Bus, a StatusNotifierItem tray); on macOS, try the app with make run" >&2
	exit 1
fi

bin=$(realpath "${1:?usage: build/smoke.sh path/to/suzuran}")
shot="$(dirname "$bin")/smoke.png"

# The version the binary reports is the one wails.json declares.
want=$(sed -n 's/.*"productVersion": *"\([^"]*\)".*/\1/p' wails.json)
got=$("$bin" version)
if [ "$got" != "suzuran $want" ]; then
	echo "smoke: $bin version says '$got', wails.json says $want" >&2
	exit 1
fi
echo "smoke: $got"

exec xvfb-run -a -s "-screen 0 1280x800x24" \
	dbus-run-session -- \
	go test -tags smoke -count=1 -v -run '^TestDesktop' ./app \
	-args -suzuran="$bin" -screenshot="$shot"
