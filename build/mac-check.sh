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

# The first-run path of the app bundle: make app's bundle (the kernels
# compiled ahead into it, signed ad hoc), then the self-check the app runs
# before its window says Ready — with the bundled library, again to see it
# remembered, and with the library compiled from source for comparison.
# Its results are in first-run.txt as well as the report.
app=$out/Suzuran.app
summary=$out/first-run.txt
bundle_app() {
	make build || return 1
	build/macos/bundle.sh --binary bin/suzuran --out "$app" &&
		build/macos/kernels.sh --app "$app" &&
		build/macos/sign.sh "$app"
}

# first_run_check NAME ARGS...: the self-check, its JSON kept as NAME.json
# and its main fields in the summary.
first_run_check() {
	local name=$1 status
	shift
	"$app/Contents/MacOS/suzuran" doctor --first-run "$@" >"$out/$name.json"
	status=$?
	cat "$out/$name.json"
	plutil -extract ok raw -o - "$out/$name.json" >/dev/null 2>&1 || { echo "$name: no result"; return 1; }
	{
		printf '%-22s ok=%s ran=%s library=%s check=%ss load=%ss runs_on=%s' "$name:" \
			"$(plutil -extract ok raw -o - "$out/$name.json")" "$(plutil -extract ran raw -o - "$out/$name.json")" \
			"$(plutil -extract library raw -o - "$out/$name.json" 2>/dev/null || echo none)" \
			"$(plutil -extract duration_s raw -o - "$out/$name.json")" "$(plutil -extract total_s raw -o - "$out/$name.json")" \
			"$(plutil -extract runs_on raw -o - "$out/$name.json")"
		if [ "$status" -ne 0 ]; then
			printf ' stage=%s error=%s' "$(plutil -extract stage raw -o - "$out/$name.json" 2>/dev/null)" \
				"$(plutil -extract error raw -o - "$out/$name.json" 2>/dev/null)"
		fi
		echo
	} >>"$summary"
	return $status
}

first_run() {
	[ -x "$app/Contents/MacOS/suzuran" ] || { echo "no app bundle (the step before failed)"; return 1; }
	local ok=0
	first_run_check first-run --state "$out/gpu-check.json" || ok=1
	first_run_check second-run --state "$out/gpu-check.json" || ok=1
	[ "$(plutil -extract ran raw -o - "$out/second-run.json" 2>/dev/null)" = false ] ||
		{ echo "the second start checked again: the result was not remembered"; ok=1; }
	[ "$(plutil -extract library raw -o - "$out/first-run.json" 2>/dev/null)" = bundled ] ||
		{ echo "the bundle's precompiled library was not the one loaded"; ok=1; }
	SUZURAN_METALLIB=none first_run_check compiled-library --state "$out/gpu-check-compiled.json" || ok=1
	return $ok
}

# on_screen PID: the process's windows as CoreGraphics lists them (no
# permission needed for owner and layer): "window" for each on-screen
# window of the normal layer, "tray" for each status item (layer 25).
on_screen() {
	osascript -l JavaScript - "$1" <<'JXA'
ObjC.import('CoreGraphics');
function run(argv) {
	const pid = Number(argv[0]);
	const all = ObjC.deepUnwrap(ObjC.castRefToObject($.CGWindowListCopyWindowInfo(1 /* kCGWindowListOptionOnScreenOnly */, 0 /* kCGNullWindowID */)));
	return all.filter(w => w.kCGWindowOwnerPID === pid)
		.map(w => w.kCGWindowLayer === 0 ? 'window' : (w.kCGWindowLayer === 25 ? 'tray' : 'layer' + w.kCGWindowLayer))
		.join(' ');
}
JXA
}

frontmost_pid() {
	osascript -e 'tell application "System Events" to get unix id of first process whose frontmost is true' 2>/dev/null
}

# The app itself, started as a user would on a fresh account (its own HOME):
# its first-run check in the window's path, then whether the window, the
# tray icon and the global shortcut (⌥Space from Finder) came up.
desktop() {
	[ -x "$app/Contents/MacOS/suzuran" ] || { echo "no app bundle (the step before failed)"; return 1; }
	local home=$out/home pid state="" waited=0 seen ok=0
	rm -rf "$home"
	mkdir -p "$home"
	HOME=$home "$app/Contents/MacOS/suzuran" >"$out/app-stdout.txt" 2>&1 &
	pid=$!
	while [ $waited -lt 300 ] && kill -0 "$pid" 2>/dev/null; do
		state=$(find "$home" -name gpu-check.json 2>/dev/null | head -1)
		[ -n "$state" ] && break
		sleep 1
		waited=$((waited + 1))
	done
	sleep 3
	if [ -n "$state" ]; then
		cp "$state" "$out/app-gpu-check.json"
		echo "app: the self-check's result after ${waited}s: $(tr -d '\n' <"$state")" | tee -a "$summary"
	else
		echo "app: no self-check result in ${waited}s" | tee -a "$summary"
		ok=1
	fi
	if ! kill -0 "$pid" 2>/dev/null; then
		wait "$pid"
		echo "app: exited early (status $?; another Suzuran running takes over the launch); see app-stdout.txt" | tee -a "$summary"
		cp -R "$home/Library/Logs/Suzuran" "$out/app-logs" 2>/dev/null
		return 1
	fi
	seen=$(on_screen "$pid") || seen="unknown (osascript failed)"
	echo "app: on screen after launch: ${seen:-nothing}" | tee -a "$summary"
	case " $seen " in *" window "*) echo "window: up" ;; *) echo "window: NOT seen"; ok=1 ;; esac | tee -a "$summary"
	case " $seen " in *" tray "*) echo "tray: up" ;; *) echo "tray: NOT seen"; ok=1 ;; esac | tee -a "$summary"
	osascript -e 'tell application "Finder" to activate' >/dev/null 2>&1
	sleep 1
	if osascript -e 'tell application "System Events" to key code 49 using {option down}' >/dev/null 2>&1; then
		sleep 2
		if [ "$(frontmost_pid)" = "$pid" ] && [[ " $(on_screen "$pid") " == *" window "* ]]; then
			echo "shortcut: up (⌥Space from Finder brought the window to the front)" | tee -a "$summary"
		else
			echo "shortcut: NOT seen (after ⌥Space from Finder the front process is $(frontmost_pid), not $pid)" | tee -a "$summary"
			ok=1
		fi
	else
		echo "shortcut: unknown (System Events may not send keys: allow this terminal in System Settings → Privacy & Security → Accessibility)" | tee -a "$summary"
	fi
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	cp -R "$home/Library/Logs/Suzuran" "$out/app-logs" 2>/dev/null
	return $ok
}

: >"$log"
step "machine" machine
step "vet and build the engine for darwin/arm64 (no cgo)" engine_for_darwin
step "Apple's metal compiler on every kernel file" metal_compiler
step "suzuran doctor" doctor
step "Metal and GPU backend tests" metal_tests
: >"$summary"
step "the app bundle (make build, bundle, kernels compiled ahead, ad hoc signature)" bundle_app
step "the first-run GPU self-check (bundled library, remembered, compiled)" first_run
step "the app: self-check, window, tray and shortcut" desktop

echo
if [ ${#failed[@]} -eq 0 ]; then
	echo "mac-check: every step passed."
else
	echo "mac-check: ${#failed[@]} step(s) failed: ${failed[*]}"
fi
if [ -s "$summary" ]; then
	echo
	echo "First run:"
	cat "$summary"
fi
echo "Send back $out/report.txt, $out/first-run.txt and $out/doctor.json (or all of $out/ but home/: tar czf mac-check.tgz --exclude home $out)."
[ ${#failed[@]} -eq 0 ]
