//go:build !linux && !darwin

package bench

import "time"

// processCPUTime is not measured on this system.
func processCPUTime() time.Duration { return 0 }
