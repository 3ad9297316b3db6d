// Package metal is the device.Device for Apple GPUs: Metal reached through
// the Objective-C runtime with purego, without cgo, so that the whole app
// still cross-compiles with CGO_ENABLED=0.
//
// The layer is deliberately thin. Everything that decides what runs — kernel
// choice, grid sizes, buffer layouts — lives once in the GPU backend above
// device.Device and is exercised on every commit through the emu device; this
// package only turns those decisions into Metal calls:
//
//   - New creates the system's default MTLDevice and one command queue.
//   - NewBuffer makes shared-storage buffers (one memory, seen by host and
//     GPU); WrapBytes wraps page-aligned host memory (the mapped checkpoint)
//     with newBufferWithBytesNoCopy, so weights are never copied.
//   - Pipeline loads the kernels once — the app bundle's precompiled
//     library of the embedded sources (Contents/Resources/kernels-DIGEST.metallib,
//     built by make app's build/macos/kernels.sh) when it is there and loads,
//     else the embedded MSL compiled at language version 3.1 (macOS 14,
//     every Apple Silicon Mac) — and caches one compute pipeline state per
//     kernel name; Library says which it was. It refuses GPUs below the Apple7 family and
//     pipelines whose SIMD width is not 32, where the kernels would compute
//     wrong results rather than fail (GitHub's hosted macOS runners expose
//     such a GPU: an Apple5 "Apple Paravirtual device").
//   - A command buffer records into one concurrent compute encoder; Barrier
//     is a buffer-scope memory barrier, so dispatches between barriers may
//     overlap on the GPU. The recording, from NewCommandBuffer to Commit,
//     runs inside one autorelease pool on one locked OS thread: one pool per
//     step, drained when the step is submitted. Wait reads the command
//     buffer's status and turns its NSError into a Go error.
//
// Hot calls (a decode step makes hundreds of dispatches) go through
// purego.SyscallN on objc_msgSend with every argument in an integer
// register, avoiding the reflection of objc.ID.Send. MTLSize arguments are
// 24-byte structs: the arm64 procedure call standard passes a composite
// larger than 16 bytes as a pointer to a caller-owned copy, which is what
// this package passes (and what purego itself does for such structs).
//
// The implementation builds only on darwin; on other systems the package is
// empty. Its tests run on macOS (see .github/workflows/macos.yml).
package metal
