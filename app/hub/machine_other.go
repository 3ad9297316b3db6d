//go:build !darwin && !linux

package hub

import "runtime"

// probeMachine knows nothing of this system; its checks are skipped.
func probeMachine() Machine { return Machine{Arch: runtime.GOARCH} }
