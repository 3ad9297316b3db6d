#!/usr/bin/env bash
# mac-check: on a Mac, everything that only a Mac can check, in one run,
# with one folder of results to send back (bin/mac-check/). `make mac-check`
# runs it from the repository root.
#
# Each step runs even when one before it failed, so that a single run
# reports everything; the exit status is 1 when any step failed.
#
# Needs: macOS 14 or later, Go 1.26, the Xcode command line tools (clang
# builds the kernel emulator and the app), and Xcode itself for Apple's
# offline `metal` compiler (Xcode 26 and later: also run
# `xcodebuild -downloadComponent MetalToolchain` once).
set -u -o pipefail

if [ "$(uname)" != Darwin ]; then
	echo "mac-check: this checks a Mac; on $(uname) run make test" >&2
	exit 2
fi

out=bin/mac-check
rm -rf "$out"
mkdir -p "$out"
log=$out/report.txt
failed=()

# step NAME COMMAND...: runs the command with its output in the report.
step() {
	local name=$1
	shift
	printf '\n===== %s\n' "$name" >>"$log"
	printf '%-60s ' "$name"
	if "$@" >>"$log" 2>&1; then
		echo ok
	else
		echo "FAILED"
		failed+=("$name")
	fi
}

machine() {
	sw_vers
	uname -m
	sysctl -n machdep.cpu.brand_string hw.memsize
	go version
	xcodebuild -version || true
	system_profiler SPDisplaysDataType | sed -n '1,20p'
}

engine_for_darwin() {
	CGO_ENABLED=0 go vet ./engine/... && CGO_ENABLED=0 go build ./engine/...
}

# Apple's offline compiler on the exact text newLibraryWithSource receives.
metal_compiler() {
	xcrun -sdk macosx metal -v || {
		echo "no metal compiler: install Xcode (and on Xcode 26 or later run: xcodebuild -downloadComponent MetalToolchain)"
		return 1
	}
	go run ./engine/gpu/metal/mslunits -out "$out/msl" || return 1
	local f status=0
	for f in "$out"/msl/*.metal; do
		echo "== $f"
		xcrun -sdk macosx metal -std=metal3.1 -Werror -c "$f" -o "${f%.metal}.air" || status=1
	done
	return $status
}

doctor() {
	go build -o "$out/suzuran" ./app || return 1
	"$out/suzuran" doctor --json >"$out/doctor.json"
	local status=$?
	"$out/suzuran" doctor >"$out/doctor.txt"
	cat "$out/doctor.txt"
	return $status
}

# The Metal device, the GPU backend on Metal and on the emulator (compared
# with each other and with transformers' reference), and the benchmark's
# metal target: the self-hosted workflow job's checks.
metal_tests() {
	CGO_ENABLED=0 go test -count=1 -v ./engine/gpu/... ./engine/bench/...
}

: >"$log"
step "machine" machine
step "vet and build the engine for darwin/arm64 (no cgo)" engine_for_darwin
step "Apple's metal compiler on every kernel file" metal_compiler
step "suzuran doctor" doctor
step "Metal and GPU backend tests" metal_tests

echo
if [ ${#failed[@]} -eq 0 ]; then
	echo "mac-check: every step passed."
else
	echo "mac-check: ${#failed[@]} step(s) failed: ${failed[*]}"
fi
echo "Send back $out/report.txt and $out/doctor.json (or all of $out/: tar czf mac-check.tgz $out)."
[ ${#failed[@]} -eq 0 ]
