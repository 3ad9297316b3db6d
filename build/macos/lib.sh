# shellcheck shell=bash
# Shared by the scripts in build/macos (sourced, not run). They keep to
# bash 3.2, the bash macOS ships.
#
# DRY_RUN=1 makes run print each macOS command instead of running it, so that
# the scripts can be followed, and their files checked, on a machine that is
# not a Mac (make release-check does, through make-app.sh --dry-run).

: "${DRY_RUN:=0}"

# fail prints the script's name and the message and exits.
fail() {
	echo "$(basename "$0" .sh): $*" >&2
	exit 1
}

# note says what the script is doing.
note() { echo "$(basename "$0" .sh): $*"; }

# run runs a command, or under DRY_RUN=1 prints it as "+ command".
run() {
	if [ "$DRY_RUN" = 1 ]; then
		printf '+'
		printf ' %q' "$@"
		printf '\n'
	else
		"$@"
	fi
}

# retry_busy runs a command as run does, and runs it again while it fails
# saying "Resource busy", up to busy_tries times with a longer pause each
# time: hdiutil create and convert fail so now and then (on CI runners and
# fresh Macs) while Spotlight or XProtect still hold the new image or its
# files. Any other failure stops at once; the command's output is shown
# either way. The dry run prints the command and says it would retry.
busy_tries=6
busy_delay=3
retry_busy() {
	if [ "$DRY_RUN" = 1 ]; then
		printf '+'
		printf ' %q' "$@"
		printf '  # again while "Resource busy", up to %d tries\n' "$busy_tries"
		return 0
	fi
	local try=1 out status
	while :; do
		status=0
		out=$("$@" 2>&1) || status=$?
		if [ -n "$out" ]; then printf '%s\n' "$out"; fi
		if [ "$status" = 0 ]; then return 0; fi
		case "$out" in
		*"Resource busy"*) ;;
		*) return "$status" ;;
		esac
		if [ "$try" -ge "$busy_tries" ]; then
			note "$1 ${2:-}: still \"Resource busy\" after $try tries; close Finder windows and Disk Utility if they show the image, wait a minute (Spotlight or XProtect may be scanning it) and run this again"
			return "$status"
		fi
		note "$1 ${2:-}: resource busy; trying again in $((busy_delay * try)) s ($try of $busy_tries)"
		sleep $((busy_delay * try))
		try=$((try + 1))
	done
}

# need_macos stops a script that needs macOS elsewhere, unless it is a dry run.
need_macos() {
	[ "$DRY_RUN" = 1 ] || [ "$(uname)" = Darwin ] ||
		fail "this step needs macOS (this is $(uname)); on Linux, make package-linux builds the .deb, and build/macos/make-app.sh --dry-run shows the macOS steps"
}

# need_tool checks that a macOS tool is installed, saying where it comes from.
need_tool() {
	[ "$DRY_RUN" = 1 ] && return 0
	command -v "$1" >/dev/null || fail "$1 is missing: $2"
}

# absolute prints a path as an absolute one (macOS's realpath has no -m).
absolute() {
	case "$1" in
	/*) echo "$1" ;;
	*) echo "$PWD/$1" ;;
	esac
}

# project_version is info.productVersion of wails.json, the one version.
project_version() {
	local v
	v=$(sed -n 's/.*"productVersion": *"\([^"]*\)".*/\1/p' "$repo/wails.json")
	[ -n "$v" ] || fail "wails.json has no info.productVersion"
	echo "$v"
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
