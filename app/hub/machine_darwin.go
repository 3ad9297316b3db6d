package hub

import "github.com/suzuran-app/suzuran/engine/gpu/metal"

// gpuWorkingSet asks Metal, through purego, for the GPU's working set on
// Apple silicon; 0 when there is none.
func gpuWorkingSet(appleSilicon bool) int64 {
	if !appleSilicon {
		return 0
	}
	d, err := metal.NewDefault()
	if err != nil {
		return 0
	}
	defer d.Close()
	return d.RecommendedMaxWorkingSetSize()
}
