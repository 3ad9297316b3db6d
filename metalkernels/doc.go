// Package metalkernels holds the model's Metal Shading Language kernels —
// one .metal file per kernel family and the headers they share — embedded
// into the binary. The metal device compiles them at run time
// (newLibraryWithSource); the emu device compiles the very same text as
// C++ through the host emulator in metalkernels/host. KERNELS.md (in the
// design documents) and host/README.md give the rules kernel code follows.
package metalkernels
