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
