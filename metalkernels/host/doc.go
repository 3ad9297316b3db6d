// Package host is the host emulator for the project's Metal kernels: it runs
// the unchanged .metal sources on the CPU, for tests and CI where no Mac is
// available.
//
// Compile runs a source pass over each file (pass.go: attributes,
// address-space keywords, threadgroup variables, half literals) and a lint
// (lint.go) that rejects what g++ would accept but Apple's compiler would
// not — pointers without an address space, memory passed across address
// spaces, double, std::, lambdas, fast-math-unsafe INFINITY/isnan, MSL's
// position-attribute types, includes the Metal device cannot resolve —
// at the .metal line; it generates
// a C entry point per kernel (gen.go), compiles everything against the shim
// headers in shim/ (Metal's types, math, SIMD-group functions, simdgroup
// matrices, atomics) with the system C++ compiler, caches the objects and
// the shared library by content hash, and loads it with purego — no cgo.
// Kernel.Dispatch runs a grid: threadgroups spread over OS threads, and the
// threads of a threadgroup run as fibers that switch at barriers and
// SIMD-group collectives (shim/emu_runtime.cc). A non-zero seed shuffles the
// fiber order at every barrier, so a test that runs a kernel under two seeds
// and compares bits finds missing barriers.
//
// README.md lists the MSL subset and the rules kernel authors follow.
package host
