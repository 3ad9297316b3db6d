//go:build !darwin && !linux

package doctor

import "runtime"

// system knows only what Go's runtime does on other systems.
func system() System {
	return System{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
}
