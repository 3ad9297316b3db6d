package bench

import (
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/suzuran-app/suzuran/engine/machine"
)

// Machine describes where a benchmark ran.
type Machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	MemBytes int64  `json:"mem_bytes"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	Go       string `json:"go"`
	// LoadStart and LoadEnd are the 1-, 5- and 15-minute load averages
	// when the benchmark started and ended: on a shared machine, a load
	// above the core count means the timings include waiting for a core.
	LoadStart [3]float64 `json:"load_start"`
	LoadEnd   [3]float64 `json:"load_end"`
}

// Commit identifies the code that ran.
type Commit struct {
	Revision string `json:"revision"`
	// Dirty says the working tree differed from Revision: from the
	// binary's stamp (go build -buildvcs, which counts untracked files
	// too) or, without one, from git at run time (tracked files only).
	// DirtyFiles lists the tracked files git reported changed at run time.
	Dirty      bool     `json:"dirty"`
	DirtyFiles []string `json:"dirty_files,omitempty"`
}

// DescribeMachine gathers the machine's CPU, core count, memory and OS.
func DescribeMachine() Machine {
	f := machine.Probe()
	m := Machine{CPU: f.Chip, Cores: f.CPUs, MemBytes: f.Memory, OS: f.OSVersion(), Arch: runtime.GOARCH, Go: runtime.Version()}
	m.LoadStart = machine.LoadAverage()
	if m.CPU == "" {
		m.CPU = "unknown"
	}
	return m
}

// CurrentCommit reads the revision the binary was built from (Go stamps it
// into `go build` binaries), or asks git in the working directory (go run,
// go test).
func CurrentCommit() Commit {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var c Commit
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				c.Revision = s.Value
			case "vcs.modified":
				c.Dirty = s.Value == "true"
			}
		}
		if c.Revision != "" {
			if c.Dirty {
				c.DirtyFiles = dirtyFiles()
			}
			return c
		}
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return Commit{Revision: "unknown"}
	}
	c := Commit{Revision: strings.TrimSpace(string(out))}
	c.DirtyFiles = dirtyFiles()
	c.Dirty = len(c.DirtyFiles) > 0
	return c
}

// dirtyFiles lists the tracked files git reports as changed in the working
// directory's checkout. Untracked files do not change what was built.
func dirtyFiles() []string {
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return nil
	}
	var files []string
	for _, line := range strings.Split(strings.TrimRight(string(st), "\n"), "\n") {
		if len(line) > 3 {
			files = append(files, strings.TrimSpace(line[3:]))
		}
	}
	return files
}
