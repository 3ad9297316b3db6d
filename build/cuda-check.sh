#!/usr/bin/env bash
# cuda-check: on a machine with an NVIDIA GPU, run the GPU backend's tests
# (engine/gpu, every test that takes its device from openTestDevice) and the
# cuda device's own on CUDA, then again under compute-sanitizer's memcheck,
# racecheck, synccheck and initcheck, and write a report.
#
#   make cuda-check                      builds with go, runs everything
#   CUDA_CHECK_BIN=DIR build/cuda-check.sh
#                                        uses test binaries built elsewhere
#                                        (CGO_ENABLED=0 go test -c), for a
#                                        machine without Go
#
# CUDA_CHECK_ROOT is the checkout to run in (default: this script's);
# CUDA_CHECK_OUT (default bin/cuda-check) receives the logs and report.md;
# CUDA_CHECK_SANITIZE is the -test.run pattern run under the sanitizers
# (default: every test; the sanitizers slow kernels 10-100 times).
set -u
root=${CUDA_CHECK_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
out=${CUDA_CHECK_OUT:-$root/bin/cuda-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=${CUDA_CHECK_BIN:-}
if [ -z "$bin" ]; then
	bin=$out/bin
	mkdir -p "$bin"
	(cd "$root" && CGO_ENABLED=0 go test -c -o "$bin/gpu.test" ./engine/gpu &&
		CGO_ENABLED=0 go test -c -o "$bin/cuda.test" ./engine/gpu/cuda) || exit 1
fi
bin=$(cd "$bin" && pwd)
export SUZURAN_TEST_DEVICE=cuda
export SUZURAN_CUDA_CACHE=${SUZURAN_CUDA_CACHE:-$out/cache}
sanitize=${CUDA_CHECK_SANITIZE:-.}
timeout=${CUDA_CHECK_TIMEOUT:-30m}

run() { # name dir command...
	local name=$1 dir=$2
	shift 2
	local t0=$SECONDS
	(cd "$root/$dir" && "$@") >"$out/$name.log" 2>&1
	echo $? >"$out/$name.rc"
	echo $((SECONDS - t0)) >"$out/$name.secs"
	echo "cuda-check: $name: exit $(cat "$out/$name.rc") in $(cat "$out/$name.secs") s"
}
run cuda engine/gpu/cuda "$bin/cuda.test" -test.v -test.timeout "$timeout"
run gpu engine/gpu "$bin/gpu.test" -test.v -test.timeout "$timeout"
for tool in memcheck racecheck synccheck initcheck; do
	extra=()
	[ "$tool" = racecheck ] && extra=(--racecheck-report all)
	run "$tool" engine/gpu compute-sanitizer --tool "$tool" "${extra[@]}" --print-limit 100 \
		"$bin/gpu.test" -test.v -test.run "$sanitize" -test.timeout "${CUDA_CHECK_SANITIZE_TIMEOUT:-$timeout}"
done

count() { grep -cE "^ *--- $2" "$out/$1.log"; }
{
	echo "# make cuda-check"
	echo
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'
	echo
	echo "| run | exit | seconds | passed | failed | skipped | sanitizer errors |"
	echo "| --- | --- | --- | --- | --- | --- | --- |"
	for name in cuda gpu memcheck racecheck synccheck initcheck; do
		errs=$(grep -oE "ERROR SUMMARY: [0-9]+" "$out/$name.log" | tail -1 | grep -oE "[0-9]+$")
		echo "| $name | $(cat "$out/$name.rc") | $(cat "$out/$name.secs") | $(count "$name" PASS) | $(count "$name" FAIL) | $(count "$name" SKIP) | ${errs:--} |"
	done
	echo
	echo "(passed, failed and skipped count tests and subtests; the sanitizer runs use -test.run '$sanitize')"
	for name in cuda gpu memcheck racecheck synccheck initcheck; do
		if grep -qE "^ *--- FAIL|^(panic|fatal error)|=========  ?[A-Z]" "$out/$name.log"; then
			echo
			echo "## $name"
			echo '```'
			grep -E "^ *--- FAIL|^(panic|fatal error)|^=========" "$out/$name.log" | head -60
			echo '```'
		fi
	done
} >"$out/report.md"
cat "$out/report.md"
