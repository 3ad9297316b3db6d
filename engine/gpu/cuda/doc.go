// Package cuda is the CUDA device: engine/gpu/device.Device on an NVIDIA
// GPU, running the project's MSL kernels unchanged. The sources go through
// the host emulator's source pass (metalkernels/host.Translate: attributes
// and address spaces blanked, threadgroup variables found), become
// __shared__ declarations and one extern "C" __global__ entry per kernel,
// and compile with NVRTC against shim/cuda_metal.h, which spells in CUDA
// what MSL has: vectors, half and bfloat, metal:: math, SIMD-group
// reductions and shuffles over warps, simdgroup matrices in Apple's lane
// layout, atomics, threadgroup_barrier.
//
// The driver API and NVRTC are loaded at run time with purego — no cgo —
// so the package builds everywhere and Available says why no device can be
// opened where there is none. Buffers are managed memory, one address for
// host and GPU as on an Apple GPU's shared memory. Command buffers launch
// in commit order on one stream, each ending at an event that Wait
// synchronises on; setBytes data goes into a per-command-buffer arena
// copied to the GPU ahead of the launches. With Options.Profile every
// dispatch is timed with CUDA events (KernelTimes).
//
// Compiled modules are cached in the process and on disk
// ($SUZURAN_CUDA_CACHE, else the user cache dir + suzuran/cuda) by a hash
// of NVRTC's path, the GPU's architecture, the flags and the sources.
package cuda
