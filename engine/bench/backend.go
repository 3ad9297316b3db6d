package bench

import (
	"fmt"
	"sort"
	"strings"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
)

// opener makes a Target of one backend kind over a loaded checkpoint; the
// returned function releases what it made.
type opener func(m *checkpoint.Model, threads int) (Target, func() error, error)

// openers holds the backend kinds this build can measure. GPU kinds add
// themselves from files that build only where their device exists.
var openers = map[string]opener{
	"cpu": func(m *checkpoint.Model, threads int) (Target, func() error, error) {
		return openCPU(m, OpenOptions{Threads: threads})
	},
}

// OpenOptions configure the backend OpenWith makes.
type OpenOptions struct {
	// Threads for the cpu backend and the emulator; 0 means all cores.
	Threads int
	// Precision and ISA choose the cpu backend's kernels ("": its
	// defaults, fast and the best this machine has).
	Precision cpu.Precision
	ISA       cpu.ISA
}

func openCPU(m *checkpoint.Model, o OpenOptions) (Target, func() error, error) {
	b, err := cpu.New(m.Weights, cpu.Options{Threads: o.Threads, Precision: o.Precision, ISA: o.ISA})
	if err != nil {
		return Target{}, nil, err
	}
	k := b.Kernels()
	return Target{Kind: "cpu", Backend: b, Weights: m.Weights, KVElemBytes: 4, Kernels: &k}, b.Close, nil
}

// Kinds lists the backend kinds Open accepts in this build.
func Kinds() []string {
	var k []string
	for name := range openers {
		k = append(k, name)
	}
	sort.Strings(k)
	return k
}

// Open makes a Target of the named backend kind ("cpu", "emu", "metal")
// over a loaded checkpoint. threads applies to the CPU backend. Call the
// returned function when done, before closing the checkpoint.
func Open(kind string, m *checkpoint.Model, threads int) (Target, func() error, error) {
	return OpenWith(kind, m, OpenOptions{Threads: threads})
}

// OpenWith is Open with the cpu backend's precision and instruction set,
// which only the cpu backend takes.
func OpenWith(kind string, m *checkpoint.Model, oo OpenOptions) (Target, func() error, error) {
	o, ok := openers[kind]
	if !ok {
		return Target{}, nil, fmt.Errorf("bench: unknown backend %q: this build has %s", kind, strings.Join(Kinds(), ", "))
	}
	if kind == "cpu" {
		o = func(m *checkpoint.Model, _ int) (Target, func() error, error) { return openCPU(m, oo) }
	} else if oo.Precision != "" || oo.ISA != "" {
		return Target{}, nil, fmt.Errorf("bench: the %s backend has no precision or instruction-set choice (the cpu backend does)", kind)
	}
	t, closeFn, err := o(m, oo.Threads)
	if err != nil {
		return Target{}, nil, fmt.Errorf("bench: %s backend: %w", kind, err)
	}
	info := Describe(m.Weights)
	info.Dir = m.Dir
	info.Layout = m.Layout.String()
	info.FileBytes = m.Bytes
	t.Model = info
	return t, closeFn, nil
}
