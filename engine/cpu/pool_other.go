//go:build !linux

package cpu

import "runtime"

// osYield lets other goroutines run; elsewhere than Linux the pool's
// polling threads leave the rest to the kernel's time slices.
func osYield() { runtime.Gosched() }
