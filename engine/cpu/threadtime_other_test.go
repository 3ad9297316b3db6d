//go:build !linux

package cpu

import "time"

// threadCPUTime is not measured here.
func threadCPUTime() (time.Duration, bool) { return 0, false }
