package hub

import (
	"strings"
	"testing"
)

func TestEvaluate(t *testing.T) {
	const gib = 1 << 30
	// About the size of mlx-community/Qwen3.6-35B-A3B-4bit's weights.
	full := Need{ModelBytes: 20e9, DownloadBytes: 20e9, DiskMargin: 2e9}
	mac := func(mem int64) Machine {
		return Machine{OS: "darwin", Arch: "arm64", Chip: "Apple M2", AppleSilicon: true, OSVersion: "15.1", Memory: mem, GPUWorkingSet: mem * 3 / 4, FreeDisk: 500e9, DiskPath: "/Users/me/.cache/huggingface/hub"}
	}
	tests := []struct {
		name    string
		machine Machine
		need    Need
		check   string
		level   Level
		says    string
	}{
		{"16 GB Mac refused", mac(16 * gib), full, "memory", Refusal, "needs at least 24 GB"},
		{"24 GB Mac warned", mac(24 * gib), full, "memory", Warning, "32 GB or more would be comfortable"},
		{"32 GB Mac fine", mac(32 * gib), full, "memory", Fine, "plenty"},
		{"8-bit model on a 36 GB Mac refused", mac(36 * gib), Need{ModelBytes: 37e9, DownloadBytes: 37e9}, "memory", Refusal, "at least 38 GB"},
		{"Intel Mac refused", Machine{OS: "darwin", Arch: "amd64", Chip: "Intel(R) Core(TM) i9", OSVersion: "14.0"}, full, "processor", Refusal, "Apple silicon (M1 or later)"},
		{"macOS 13 refused", func() Machine { m := mac(64 * gib); m.OSVersion = "13.6.1"; return m }(), full, "macos", Refusal, "macOS 14 Sonoma or later"},
		{"macOS 14 fine", func() Machine { m := mac(64 * gib); m.OSVersion = "14.0"; return m }(), full, "macos", Fine, "recent enough"},
		{"GPU working set below the model warned", func() Machine { m := mac(32 * gib); m.GPUWorkingSet = 18 * gib; return m }(), full, "gpu", Warning, "answers may come slowly"},
		{"GPU working set above the model fine", mac(64 * gib), full, "gpu", Fine, "can hold the model"},
		{"disk too small refused", func() Machine { m := mac(64 * gib); m.FreeDisk = 15e9; return m }(), full, "disk", Refusal, "Free up 7.00 GB"},
		{"disk just enough fine", func() Machine { m := mac(64 * gib); m.FreeDisk = 22e9; return m }(), full, "disk", Fine, "has 22.0 GB free"},
		{"already downloaded", func() Machine { m := mac(64 * gib); m.FreeDisk = 1e9; return m }(), Need{ModelBytes: 20e9}, "disk", Fine, "already on this disk"},
		{"tiny model on an 8 GB Linux machine warned", Machine{OS: "linux", Memory: 8 * gib}, Need{ModelBytes: 1_334_192}, "memory", Warning, "12 GB or more"},
		{"Linux with too little memory refused", Machine{OS: "linux", Memory: 16 * gib}, full, "memory", Refusal, "This computer has 16 GB"},
		{"Linux with room fine", Machine{OS: "linux", Memory: 64 * gib}, full, "memory", Fine, "plenty"},
		{"Linux runs on the processor", Machine{OS: "linux", Memory: 64 * gib}, full, "processor", Fine, "runs on the processor"},
		{"tiny model on a 16 GB Linux machine fine", Machine{OS: "linux", Memory: 16 * gib}, Need{ModelBytes: 1_334_192}, "memory", Fine, "plenty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Evaluate(tt.machine, tt.need)
			var found *Finding
			for i, f := range r.Findings {
				if f.Check == tt.check {
					found = &r.Findings[i]
				}
			}
			if found == nil {
				t.Fatalf("no %s finding in %+v", tt.check, r.Findings)
			}
			if found.Level != tt.level || !strings.Contains(found.Message, tt.says) {
				t.Errorf("%s: %v %q, want %v saying %q", tt.check, found.Level, found.Message, tt.level, tt.says)
			}
			if r.CanRun() != (r.Worst() != Refusal) {
				t.Error("CanRun disagrees with Worst")
			}
		})
	}
}

func TestCheckMachineHere(t *testing.T) {
	r := CheckMachine(Need{ModelBytes: 1 << 20, DownloadBytes: 1 << 20, DiskMargin: 1}, t.TempDir())
	if r.Machine.Memory <= 0 || r.Machine.FreeDisk <= 0 {
		t.Fatalf("the probe found no memory or disk: %+v", r.Machine)
	}
	if !r.CanRun() {
		t.Errorf("a 1 MB model cannot run here? %+v", r.Findings)
	}
	for _, f := range r.Findings {
		t.Logf("%s %s: %s", f.Check, f.Level, f.Message)
	}
}
