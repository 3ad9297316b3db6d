package host

import "sort"

// Translation is the source pass's output for a compiler other than the
// emulator's (NVRTC for the CUDA device): the same processed text the
// emulator compiles, without its shim include and entry points, so that
// another shim and another generator can take it from there.
type Translation struct {
	// Headers are the processed project headers by file name, each
	// starting with a #line directive naming PathPrefix + name.
	Headers map[string]string
	// Units are the .metal files in name order.
	Units []TranslatedUnit
}

// TranslatedUnit is one .metal file after the pass.
type TranslatedUnit struct {
	Name string
	// Text is the processed source, line for line the .metal file
	// (without a leading #line: the caller adds its own include first).
	// Threadgroup variables read `auto& name = ::emu::tg_var<T[dims]>()`.
	Text    string
	Kernels []KernelEntry
}

// KernelEntry is one kernel a unit exports.
type KernelEntry struct {
	// Host is the kernel's host name; Call the C++ expression naming the
	// function (gemv<FmtF32>).
	Host, Call string
	Params     []Param
	// MaxThreads is [[max_total_threads_per_threadgroup(n)]], 0 if absent.
	MaxThreads int
}

// Translate runs the source pass and the lint over sources (as Compile
// does, with the same errors) and returns the processed text.
func Translate(sources map[string]string, opts Options) (*Translation, error) {
	b := &build{opts: opts}
	if err := b.prepare(sources); err != nil {
		return nil, err
	}
	t := &Translation{Headers: b.headers}
	var names []string
	for n := range b.passed {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		u := TranslatedUnit{Name: n, Text: b.passed[n]}
		for _, e := range b.unitEntries[n] {
			u.Kernels = append(u.Kernels, KernelEntry{Host: e.host, Call: e.call, Params: e.params, MaxThreads: e.maxThreads})
		}
		t.Units = append(t.Units, u)
	}
	return t, nil
}
