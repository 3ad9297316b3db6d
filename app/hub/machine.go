package hub

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
	"github.com/suzuran-app/suzuran/engine/machine"
)

// Level is how a machine check result bears on running the model.
type Level int

const (
	// Fine: nothing stands in the way.
	Fine Level = iota
	// Warning: the model will run, with a caveat the user should know.
	Warning
	// Refusal: the model cannot run here, or the download cannot fit.
	Refusal
)

func (l Level) String() string {
	return [...]string{"ok", "warning", "refused"}[l]
}

// MarshalText writes the level as its name, for the UI's JSON.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// Finding is one result of the machine check, in words for someone who is
// not a developer.
type Finding struct {
	// Check is what was checked: "processor", "macos", "memory", "gpu" or
	// "disk".
	Check   string `json:"check"`
	Level   Level  `json:"level"`
	Message string `json:"message"`
}

// Report is the machine check's findings, in the order they were made.
type Report struct {
	Machine  Machine   `json:"machine"`
	Findings []Finding `json:"findings"`
}

// Worst is the most serious level among the findings.
func (r Report) Worst() Level {
	worst := Fine
	for _, f := range r.Findings {
		worst = max(worst, f.Level)
	}
	return worst
}

// CanRun reports whether no check refused.
func (r Report) CanRun() bool { return r.Worst() < Refusal }

// Machine is what the check knows of this computer. Zero fields are unknown
// and their checks are skipped.
type Machine struct {
	OS   string `json:"os"`   // runtime.GOOS
	Arch string `json:"arch"` // runtime.GOARCH of the hardware (arm64 under Rosetta too)
	// Chip names the processor ("Apple M3 Pro").
	Chip string `json:"chip"`
	// AppleSilicon is true on a Mac with an M-series chip.
	AppleSilicon bool `json:"appleSilicon"`
	// OSVersion is the macOS version ("14.5"); "" elsewhere.
	OSVersion string `json:"osVersion"`
	// Memory is the installed memory in bytes (unified memory on a Mac).
	Memory int64 `json:"memory"`
	// GPUWorkingSet is Metal's recommendedMaxWorkingSetSize in bytes.
	GPUWorkingSet int64 `json:"gpuWorkingSet"`
	// FreeDisk is the free space where the model goes; DiskPath that place.
	FreeDisk int64  `json:"freeDisk"`
	DiskPath string `json:"diskPath"`
}

// Need is what a model asks of the machine.
type Need struct {
	// ModelBytes is the size of the weights, which stay mapped in memory
	// while the model runs.
	ModelBytes int64
	// DownloadBytes is what remains to download (0 when it is on disk).
	DownloadBytes int64
	// DiskMargin is the free space to keep after the download.
	DiskMargin int64
}

// What the model needs beyond its weights, and the floors for the full
// model on a Mac.
const (
	// workingBytes is the KV cache, recurrent state and scratch buffers at
	// a 32K-token context: Qwen3.6-35B-A3B keeps 20 kB of KV cache a token
	// (10 attention layers, 2 KV heads of 256, K and V in bf16), 640 MB at
	// 32K, plus 63 MB of DeltaNet state, rounded up to 1 GiB.
	workingBytes = 1 << 30
	// systemBytes is what macOS (or Linux) and a few open apps keep.
	systemBytes = 3 << 30
	// comfortBytes is the room beyond that which keeps the rest of the
	// computer feeling normal while the model runs.
	comfortBytes = 8 << 30
	// macMinimum and macComfortable: Qwen3.6-35B-A3B in 4 bits (about
	// 20 GB of weights) runs on a 24 GB Mac and runs well from 32 GB. They
	// also hold for a smaller test model: the app is made for that one.
	macMinimum     = 24 << 30
	macComfortable = 32 << 30
)

// Evaluate judges a machine against a model's needs. It is pure, so that
// every rule is tested on any system; CheckMachine feeds it this machine.
func Evaluate(m Machine, need Need) Report {
	r := Report{Machine: m}
	add := func(check string, level Level, format string, args ...any) {
		r.Findings = append(r.Findings, Finding{Check: check, Level: level, Message: fmt.Sprintf(format, args...)})
	}
	resident := need.ModelBytes + workingBytes
	minimum, comfortable := resident+systemBytes, resident+systemBytes+comfortBytes
	if m.OS == "darwin" {
		minimum, comfortable = max(minimum, macMinimum), max(comfortable, macComfortable)
		switch {
		case !m.AppleSilicon:
			add("processor", Refusal, "This Mac has an Intel processor (%s). Suzuran needs a Mac with Apple silicon (M1 or later).", orUnknown(m.Chip))
		default:
			add("processor", Fine, "This Mac has Apple silicon (%s).", orUnknown(m.Chip))
		}
		if m.OSVersion != "" {
			if major(m.OSVersion) < 14 {
				add("macos", Refusal, "This Mac runs macOS %s. Suzuran needs macOS 14 Sonoma or later: update it in System Settings, General, Software Update.", m.OSVersion)
			} else {
				add("macos", Fine, "macOS %s is recent enough.", m.OSVersion)
			}
		}
	}
	if m.Memory > 0 {
		place := "This Mac"
		if m.OS != "darwin" {
			place = "This computer"
		}
		switch {
		case m.Memory < minimum:
			add("memory", Refusal, "%s has %s of memory. The model needs at least %s to run (it takes %s by itself), so it would not work here.",
				place, formatMemory(m.Memory), formatMemory(minimum), formatMemory(resident))
		case m.Memory < comfortable:
			add("memory", Warning, "%s has %s of memory: enough for the model (%s), but little room is left. Quit large apps while you chat; %s or more would be comfortable.",
				place, formatMemory(m.Memory), formatMemory(resident), formatMemory(comfortable))
		default:
			add("memory", Fine, "%s has %s of memory, plenty for the model (%s).", place, formatMemory(m.Memory), formatMemory(resident))
		}
		if m.OS == "linux" {
			add("processor", Fine, "On Linux the model runs on the processor (%d cores), which is slower than a Mac's graphics.", runtime.NumCPU())
		}
	}
	if m.GPUWorkingSet > 0 {
		if m.GPUWorkingSet < resident {
			add("gpu", Warning, "macOS lets the graphics processor use about %s at once and the model needs %s, so answers may come slowly. Quitting other apps will not change this limit; a Mac with more memory would.",
				formatMemory(m.GPUWorkingSet), formatMemory(resident))
		} else {
			add("gpu", Fine, "The graphics processor can hold the model (%s of the %s macOS allows it).", formatMemory(resident), formatMemory(m.GPUWorkingSet))
		}
	}
	if m.DiskPath != "" {
		switch {
		case need.DownloadBytes == 0:
			add("disk", Fine, "The model is already on this disk; nothing needs to be downloaded.")
		case m.FreeDisk < need.DownloadBytes+need.DiskMargin:
			add("disk", Refusal, "The download needs %s and the disk has %s free. Free up %s (so that %s stays free afterwards) and try again.",
				bytesize.Format(need.DownloadBytes), bytesize.Format(m.FreeDisk), bytesize.Format(need.DownloadBytes+need.DiskMargin-m.FreeDisk), bytesize.Format(need.DiskMargin))
		default:
			add("disk", Fine, "The download needs %s; the disk has %s free.", bytesize.Format(need.DownloadBytes), bytesize.Format(m.FreeDisk))
		}
	}
	return r
}

// probeMachine reads this computer's facts (engine/machine) and, on Apple
// silicon, the GPU's working set.
func probeMachine() Machine {
	f := machine.Probe()
	m := Machine{OS: f.OS, Arch: f.Arch, Chip: f.Chip, AppleSilicon: f.AppleSilicon, Memory: f.Memory}
	if f.OS == "darwin" {
		m.OSVersion = f.Version
	}
	m.GPUWorkingSet = gpuWorkingSet(m.AppleSilicon)
	return m
}

// CheckMachine looks at this computer and judges it against need; dir is
// where the model goes (the Hugging Face cache).
func CheckMachine(need Need, dir string) Report {
	m := probeMachine()
	if free, err := FreeSpace(dir); err == nil {
		m.FreeDisk, m.DiskPath = free, dir
	}
	return Evaluate(m, need)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown chip"
	}
	return s
}

// major is the first number of a version such as "14.5.1".
func major(version string) int {
	n, _ := strconv.Atoi(strings.SplitN(version, ".", 2)[0])
	return n
}
