# Suzuran's build. `make run` and `make test` install what they need first
# (see `deps`), so both work on a fresh Debian machine that has Go and Node.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
NPM ?= npm

# The version shown by `suzuran version` and written into Info.plist comes
# from wails.json, the one place it is kept.
VERSION := $(shell sed -n 's/.*"productVersion": *"\([^"]*\)".*/\1/p' wails.json)
LDFLAGS := -X main.version=$(VERSION)

# Wails v2 needs these tags for a real desktop build; webkit2_41 selects
# libwebkit2gtk-4.1 on Linux (the libsoup 3 build, which distributions keep
# as they drop 4.0). macOS ignores it.
TAGS := desktop,production,webkit2_41

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
ACTIONLINT := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12

# The Linux package: bin/suzuran_VERSION_ARCH.deb (Debian's architecture name).
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || $(GO) env GOARCH)
DEB := bin/suzuran_$(subst -,~,$(VERSION))_$(DEB_ARCH).deb

# On macOS, Wails' file dialogs link UniformTypeIdentifiers, and the bundle
# promises macOS 14 (LSMinimumSystemVersion in Info.plist.tmpl).
ifeq ($(shell uname),Darwin)
export CGO_CFLAGS += -mmacosx-version-min=14.0
export CGO_LDFLAGS += -framework UniformTypeIdentifiers -mmacosx-version-min=14.0
endif

# Debian packages: WebKitGTK and GTK headers for the window; Xvfb, xauth,
# dbus, xdotool, ImageMagick (import) and a font for the desktop smoke test;
# g++ for -race and the kernel emulator; file to name the darwin binaries;
# tmux for the terminal test of suzuran pull's progress bar; chromium for the
# browser end-to-end test of the chat window (driven by playwright-core);
# desktop-file-utils (desktop-file-validate) and shellcheck for the release
# check (ImageMagick also renders the Linux package's icon sizes); qemu-user
# (qemu-aarch64) for the CPU backend's arm64 kernels; the aarch64 cross
# toolchain (its headers, libraries and linker) and clang for the kernel
# emulator's arm64 build (g++ 12 has no _Float16 in C++ on arm64).
DEB_PACKAGES := libwebkit2gtk-4.1-dev libgtk-3-dev pkg-config g++ \
	xvfb xauth dbus dbus-x11 xdotool imagemagick fonts-dejavu-core file \
	tmux chromium desktop-file-utils shellcheck qemu-user \
	g++-aarch64-linux-gnu clang

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

FRONTEND_SOURCES := $(shell find frontend/src -type f 2>/dev/null) \
	frontend/index.html frontend/vite.config.ts frontend/svelte.config.js \
	frontend/tsconfig.json frontend/package-lock.json

.PHONY: all run build test bench lint deps deps-debian deps-frontend app clean \
	vet go-test frontend-test smoke darwin-check api-e2e e2e package-linux release-check \
	arm64-test

all: build

## run: build the desktop app and start it (under Xvfb and a private D-Bus
## session when there is no display or session bus, as on a server).
run: build
	@if [ "$$(uname)" != Linux ]; then exec ./bin/suzuran; fi; \
	wrap=(); \
	if [ -z "$${DBUS_SESSION_BUS_ADDRESS:-}" ]; then wrap=(dbus-run-session --); fi; \
	if [ -z "$${DISPLAY:-}" ] && [ -z "$${WAYLAND_DISPLAY:-}" ]; then \
		echo "no display: running under Xvfb"; \
		wrap=(xvfb-run -a -s "-screen 0 1280x800x24" "$${wrap[@]}"); \
	fi; \
	exec "$${wrap[@]}" ./bin/suzuran

## build: bin/suzuran, the desktop app with the frontend embedded.
build: deps frontend/dist/index.html
	$(GO) build -tags $(TAGS) -ldflags "$(LDFLAGS)" -o bin/suzuran ./app

frontend/dist/index.html: $(FRONTEND_SOURCES) frontend/node_modules/.package-lock.json
	cd frontend && $(NPM) run build

## test: everything CI checks, the quick stages first so that they fail
## fast; go-test, the engine's tests, takes longest.
test: deps vet frontend-test api-e2e smoke e2e darwin-check release-check arm64-test go-test
	@echo "make test: all checks passed"

vet:
	$(GO) vet ./...

# Every package runs under the race detector: the engine's goroutine, its
# queue and the CPU worker pool meet there as much as the app's tray, window
# and streams do. The whole tree takes about 2 minutes 15 seconds this way on
# two cores (measured with a warm build cache), so there is no separate run
# without -race.
go-test:
	$(GO) test -count=1 -race -timeout 20m ./...

# The emulator's arm64 build: clang, which takes its target from the name
# it is run by, with the cross toolchain's sysroot; qemu-aarch64 loads the
# arm64 libraries from there and reports 16 KiB pages.
EMU_ARM64_CXX := $(CURDIR)/bin/aarch64-linux-gnu-clang++
EMU_ARM64 := CGO_ENABLED=0 GOARCH=arm64 CXX=$(EMU_ARM64_CXX) \
	QEMU_LD_PREFIX=/usr/aarch64-linux-gnu QEMU_PAGESIZE=16384
EMU_ARM64_GPU_TESTS := TestNorms$$|TestConv$$|TestDeltaNetScan$$|TestRouterTopK$$|TestArgmax$$|TestCopy$$|TestEmbed$$
EMU_ARM64_GPU_TESTS := $(EMU_ARM64_GPU_TESTS)|TestGEMV$$/^(q4_37x320_rows3_xoff0|q4_37x320_rows11_xoff0|q8_21x192_rows8_xoff4|f16_29x96_rows2_xoff0|bf16_45x204_rows2_xoff4|f32_37x203_rows5_xoff0)$$
EMU_ARM64_GPU_TESTS := $(EMU_ARM64_GPU_TESTS)|TestGEMM$$/^(half_q4_33x320_rows40|float_q8_65x160_rows131|half_bf16_70x96_rows33)$$
EMU_ARM64_GPU_TESTS := $(EMU_ARM64_GPU_TESTS)|TestMoEExperts$$/^(q4_grouped_half_rows37|q8_decode_rows8|bf16_grouped_float_rows37|f16_decode_rows3)$$
EMU_ARM64_GPU_TESTS := $(EMU_ARM64_GPU_TESTS)|TestAttention$$/^(d256_pos250_rows9_kvbf16|d32_pos40_rows70_kvf32)$$
EMU_ARM64_GPU_TESTS := $(EMU_ARM64_GPU_TESTS)|TestSample$$/^(0|1)$$
# (12 tests, 17 of their cases: the recipe checks that all of them ran.)

## arm64-test: the CPU backend's kernel and fast-path fixture tests built
## for arm64 and run under qemu-user: the NEON integer kernels (int16 and
## sdot), the activations' NEON exponentials and the Go loops that arm64
## runs, then the integer kernels again
## on a CPU without the dot-product extension (Cortex-A72). Then the kernel
## emulator built for arm64 (its arm64 context switch, the one Apple silicon
## runs) with 16 KiB pages as on Apple silicon: all of metalkernels/host and
## engine/gpu/emu, and one or more cases of every kernel family's test in
## engine/gpu (about 2 minutes; all of them would take 5).
arm64-test: $(EMU_ARM64_CXX)
	GOARCH=arm64 $(GO) test -count=1 -exec qemu-aarch64 \
		-run 'TestQ8|TestFMA32|TestFusedF32|TestKernelsFor|TestMatMul|TestDequantRow|TestFixtures$$|TestFixturesFast|TestForcedLevel|TestAttention|TestDeltaStep|TestAxpyDot|TestBatchExact|TestExpf|TestActivation|TestConvRows|TestScaleAdd' ./engine/cpu
	QEMU_CPU=cortex-a72 GOARCH=arm64 $(GO) test -count=1 -exec qemu-aarch64 \
		-run 'TestQ8NEON|TestQ8LevelsAgree|TestFusedF32|TestKernelsFor' ./engine/cpu
	$(EMU_ARM64) $(GO) test -count=1 -exec qemu-aarch64 ./metalkernels/host/ ./engine/gpu/emu/
	@log=bin/arm64-emu-gpu.log; echo "engine/gpu under qemu-aarch64 (output in $$log)"; \
	$(EMU_ARM64) $(GO) test -count=1 -v -exec qemu-aarch64 -run '$(EMU_ARM64_GPU_TESTS)' ./engine/gpu/ >$$log 2>&1; \
	rc=$$?; grep -E '^(--- |ok|FAIL)' $$log; \
	if [ $$rc != 0 ]; then tail -40 $$log; exit $$rc; fi; \
	top=$$(grep -c '^--- PASS' $$log); \
	sub=$$(grep -cE '^    --- PASS: Test(GEMV|GEMM|MoEExperts|Attention|Sample)/' $$log); \
	if [ "$$top/$$sub" != 12/17 ]; then \
		echo "arm64-test: $$top tests and $$sub cases of engine/gpu ran, not the 12 and 17 EMU_ARM64_GPU_TESTS names: renamed?"; exit 1; \
	fi

$(EMU_ARM64_CXX):
	@command -v clang++ >/dev/null || { echo "clang++ is missing: make deps-debian installs clang and the aarch64 cross toolchain"; exit 1; }
	mkdir -p $(@D)
	ln -sf "$$(command -v clang++)" $@

frontend-test: frontend/node_modules/.package-lock.json
	cd frontend && $(NPM) test

## api-e2e: the official openai and @anthropic-ai/sdk npm clients (Node's
## test runner) against `suzuran serve` on the tiny fixture model, started
## by the tests (app/server/testdata/e2e). The serve binary needs no
## frontend, so it is built without the desktop tags.
## Then the Vercel AI SDK, LangChain JS and the OpenAI Agents SDK
## (app/server/testdata/sdks) against serve on the tiny model and the demo
## model, and the coding agents Claude Code and Codex
## (app/server/testdata/agents) against serve on the demo model, offline,
## each to a completed run.
API_E2E := app/server/testdata/e2e
API_SDKS := app/server/testdata/sdks
API_AGENTS := app/server/testdata/agents
api-e2e: $(API_E2E)/node_modules/.package-lock.json $(API_SDKS)/node_modules/.package-lock.json $(API_AGENTS)/node_modules/.package-lock.json
	$(GO) build -o bin/suzuran-serve ./app
	cd $(API_E2E) && SUZURAN_BIN=$(CURDIR)/bin/suzuran-serve \
		SUZURAN_MODEL=$(CURDIR)/engine/internal/fixtures/testdata/qwen35moe-tiny/mlx-4bit $(NPM) test
	cd $(API_SDKS) && SUZURAN_BIN=$(CURDIR)/bin/suzuran-serve \
		SUZURAN_MODEL=$(CURDIR)/engine/internal/fixtures/testdata/qwen35moe-tiny/mlx-4bit $(NPM) test
	cd $(API_AGENTS) && SUZURAN_BIN=$(CURDIR)/bin/suzuran-serve $(NPM) test

# Like the frontend's: npm ci runs again only when the lock changed.
$(API_E2E)/node_modules/.package-lock.json: $(API_E2E)/package-lock.json $(API_E2E)/package.json
	cd $(API_E2E) && $(NPM) ci --no-audit --no-fund
	touch $@

$(API_SDKS)/node_modules/.package-lock.json: $(API_SDKS)/package-lock.json $(API_SDKS)/package.json
	cd $(API_SDKS) && $(NPM) ci --no-audit --no-fund
	touch $@

$(API_AGENTS)/node_modules/.package-lock.json: $(API_AGENTS)/package-lock.json $(API_AGENTS)/package.json
	cd $(API_AGENTS) && $(NPM) ci --no-audit --no-fund
	touch $@

## e2e: the chat window in headless Chromium against `suzuran serve` (the
## API and the chat UI on one port) on the demo model and the tiny fixture
## model (frontend/e2e); screenshots of the main states go to bin/e2e/.
e2e: build
	$(GO) build -o bin/fakehub ./app/internal/fakehub/cmd/fakehub
	cd frontend && SUZURAN=bin/suzuran FAKEHUB=bin/fakehub E2E_SHOTS=bin/e2e node --test e2e/chat.e2e.mjs e2e/welcome.e2e.mjs e2e/docs.e2e.mjs e2e/security.e2e.mjs e2e/window.e2e.mjs

## fuzz-docs: each fuzz test of app/docs (one per format's parser, and
## FuzzExtract for the dispatcher) for FUZZTIME (60 s) each, one after the
## other: about eleven minutes. Not part of make test, whose go test runs
## their seeds. A failing input is saved under app/docs/testdata/fuzz/,
## where go test then runs it as a seed. Go 1.26's fuzzing coordinator can
## fail a run on its own deadline as FUZZTIME ends ("context deadline
## exceeded", no input written: golang/go#75804, fixed in Go 1.27); such a
## run counts as passed, any other failure fails the target.
.PHONY: fuzz-docs
FUZZTIME ?= 60s
fuzz-docs:
	@mkdir -p bin; failed=""; \
	for fuzz in $$($(GO) test -list '^Fuzz' ./app/docs | grep '^Fuzz'); do \
		echo "== $$fuzz"; \
		inputs=$$(ls app/docs/testdata/fuzz/$$fuzz 2>/dev/null | wc -l || true); \
		if $(GO) test -run '^$$' -fuzz "^$$fuzz\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./app/docs 2>&1 | tee bin/fuzz-docs.log; then continue; fi; \
		if grep -qx '    context deadline exceeded' bin/fuzz-docs.log && ! grep -q 'Failing input written' bin/fuzz-docs.log && \
			[ "$$(ls app/docs/testdata/fuzz/$$fuzz 2>/dev/null | wc -l || true)" = "$$inputs" ]; then \
			echo "$$fuzz: passed (the coordinator's deadline at the end, golang/go#75804; no failing input)"; \
		else failed="$$failed $$fuzz"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz-docs failed:$$failed (failing inputs: app/docs/testdata/fuzz/)"; exit 1; fi

## smoke: the built app under Xvfb with a private D-Bus session: its window
## shows something, its tray menu lists the items, and Quit ends it with 0.
smoke: build
	build/smoke.sh bin/suzuran

## mac-check: on a Mac, every check only a Mac can make — Apple's metal
## compiler on every kernel file, suzuran doctor, the Metal device and GPU
## backend tests, and the app's first run: the bundle with its kernels
## compiled ahead, the GPU self-check (its result and time, the library
## loaded: bundled or compiled), and whether the window, the tray icon and
## the shortcut came up — with the results to send back in bin/mac-check/
## (not part of make test, which runs on Linux).
.PHONY: mac-check
mac-check:
	build/mac-check.sh

## darwin-check: GOOS=darwin builds of every package that needs no cgo, Mach-O
## test binaries of the engine, and a type-check of the cgo-bound rest.
darwin-check:
	$(GO) run ./build/darwincheck -out bin/darwin

## release-check: what a release needs, checked here: the workflows
## (actionlint, with shellcheck on their run: scripts), the release scripts
## (shellcheck), the macOS bundle through a dry run of
## build/macos/make-app.sh with Info.plist and the entitlements validated,
## the update check against a local releases feed, and the real .deb (make
## package-linux) validated and unpacked into a scratch root.
release-check: package-linux
	$(GO) run $(ACTIONLINT) -shellcheck=shellcheck -pyflakes=
	shellcheck -x build/macos/*.sh build/linux/*.sh
	SUZURAN_DEB=$(abspath $(DEB)) $(GO) test -count=1 ./app/internal/release/ ./app/internal/bundle/ ./app/update/

# ---- bench: begin ----
# The reference benchmark of BENCHMARKS.md (the body of this target belongs to
# the benchmark; engine/bench and app/cmd_bench.go say what it measures).
# It builds, once and cached under the user cache folder, a synthetic
# checkpoint with the full model's width and vocabulary and 4 layers (3
# DeltaNet + 1 attention), then measures the cpu backend: prompts of 512 and
# 4,096 tokens, each prefilled in 512-token chunks as the engine does and
# followed by 64 decode steps, 3 runs of each; on the project's shared 2-core
# machine the whole target took under 3 minutes, first checkpoint build
# included (BENCHMARKS.md). On macOS it measures metal the same way with 128 decode
# steps. The binary is stamped with its git revision (-buildvcs=auto), which
# the reports carry. Where the build has the kernel emulator
# it measures emu with an 8-token prompt and 4 decode steps: emu runs the GPU
# code path on the CPU, so its timings are not GPU speed; its counters are the
# GPU pipeline's. Reports go to bin/bench/<backend>.json and the table puts
# them side by side. The synthetic checkpoint imitates the config.json of
# mlx-community/Qwen3.6-35B-A3B-4bit (built into the binary, engine/synth);
# BENCH_CONFIG=FILE imitates another config.json.
BENCH_DIR := bin/bench
BENCH_CONFIG ?=
BENCH_FLAGS := --synthetic $(if $(BENCH_CONFIG),--config $(BENCH_CONFIG))
bench:
	@mkdir -p $(BENCH_DIR)
	$(GO) build -buildvcs=auto -o $(BENCH_DIR)/suzuran ./app
	@kinds=$$($(BENCH_DIR)/suzuran bench --list-backends); reports=(); \
	run() { \
		echo "== suzuran bench --backend $$*"; \
		$(BENCH_DIR)/suzuran bench $(BENCH_FLAGS) --backend "$$@" --out $(BENCH_DIR)/$$1.json >/dev/null; \
		reports+=($(BENCH_DIR)/$$1.json); \
	}; \
	run cpu --prompt 512,4096 --gen 64 --runs 3; \
	if grep -qx metal <<<"$$kinds"; then run metal --prompt 512,4096 --gen 128 --runs 3; fi; \
	if grep -qx emu <<<"$$kinds"; then run emu --prompt 8 --gen 4 --runs 1 --warmup 1 --layer-costs off; fi; \
	echo; $(BENCH_DIR)/suzuran bench --table "$${reports[@]}"
# ---- bench: end ----

## cuda-check: on a machine with an NVIDIA GPU, the GPU tests on the cuda
## device, then under compute-sanitizer (memcheck, racecheck, synccheck,
## initcheck); the report goes to bin/cuda-check/report.md.
.PHONY: cuda-check
cuda-check:
	bash build/cuda-check.sh

lint: deps frontend/node_modules/.package-lock.json
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd frontend && $(NPM) run check

## deps: install what is missing, and nothing that is already there.
deps: deps-debian deps-frontend

deps-debian:
	@if [ "$$(uname)" != Linux ] || ! command -v dpkg-query >/dev/null; then exit 0; fi; \
	missing=$$(for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' "$$p" 2>/dev/null | grep -q 'install ok installed' || echo "$$p"; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		$(SUDO) apt-get update; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi

deps-frontend: frontend/node_modules/.package-lock.json

# npm ci writes node_modules/.package-lock.json, so it runs again only when
# the lock file or package.json is newer than the installed tree.
frontend/node_modules/.package-lock.json: frontend/package-lock.json frontend/package.json
	cd frontend && $(NPM) ci --no-audit --no-fund
	touch $@

## app: bin/Suzuran.app and bin/Suzuran-VERSION.dmg on a Mac: the arm64
## binary with cgo and the desktop tags (an Intel Mac's clang cross-compiles
## the cgo parts), bundled, signed with the hardened runtime (Developer ID
## with SUZURAN_SIGN_IDENTITY, ad hoc without), notarised and stapled when
## credentials are set; build/macos/make-app.sh runs each step's script.
app:
	@if [ "$$(uname)" != Darwin ]; then \
		echo "make app builds the macOS app and its DMG, and bundling needs macOS (this is $$(uname))."; \
		echo "Here, instead:"; \
		echo "  make build             bin/suzuran, the app for this system"; \
		echo "  make package-linux     $(DEB), the Debian package"; \
		echo "  build/macos/make-app.sh --dry-run --binary bin/suzuran"; \
		echo "                         the bundle's layout and every macOS step, printed"; \
		exit 1; \
	fi
	GOARCH=arm64 $(MAKE) build
	build/macos/make-app.sh --binary bin/suzuran --out-dir bin

## package-linux: the Debian package (build/linux/package-deb.sh), for
## `sudo apt install ./$(DEB)`.
package-linux: build
	@if [ "$$(uname)" != Linux ]; then echo "make package-linux builds a Debian package and needs Linux (this is $$(uname)); on a Mac, make app"; exit 1; fi
	build/linux/package-deb.sh --binary bin/suzuran --out bin --arch $(DEB_ARCH)

clean:
	rm -rf bin frontend/node_modules engine/tokenizer/testdata/node/node_modules \
		app/hub/testdata/node/node_modules $(API_E2E)/node_modules
	find frontend/dist -mindepth 1 ! -name .gitkeep -delete 2>/dev/null || true
