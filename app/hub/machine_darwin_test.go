package hub

import "testing"

// TestProbeThisMac reads this Mac's facts: sysctl's answers and Metal's
// working set. It runs on the macOS CI runners.
func TestProbeThisMac(t *testing.T) {
	m := probeMachine()
	t.Logf("%+v", m)
	if m.Memory < 4<<30 || m.OSVersion == "" || major(m.OSVersion) < 11 || m.Chip == "" {
		t.Fatalf("implausible probe: %+v", m)
	}
	if m.AppleSilicon && m.GPUWorkingSet <= 0 {
		t.Errorf("Apple silicon without a GPU working set: %+v", m)
	}
	if m.GPUWorkingSet > m.Memory {
		t.Errorf("GPU working set %d above the memory %d", m.GPUWorkingSet, m.Memory)
	}
}
