package doctor

import (
	"sort"
	"strings"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
	"github.com/suzuran-app/suzuran/metalkernels"
	"github.com/suzuran-app/suzuran/metalkernels/host"
)

// probeEmu checks the kernel emulator: each kernel file compiled on its
// own as C++ (so that one broken file does not hide the others), then the
// device over all of them.
func probeEmu(opt Options, d *Device) (device.Device, func()) {
	d.Kernels = emuKernels(opt.Threads)
	dev, err := emu.New(emu.Options{Threads: opt.Threads})
	if err != nil {
		d.Error = err.Error()
		return nil, nil
	}
	d.Name = dev.Name()
	d.SupportsKernels = true
	d.MaxBufferBytes = int64(dev.MaxBufferLength())
	return dev, func() { dev.Close() }
}

// emuKernels compiles every .metal file with all the headers, as the
// emulator's full build does; the per-file objects are the full build's
// (the cache is keyed by content), so this costs a link per file once the
// cache is warm.
func emuKernels(threads int) []KernelFamily {
	sources := metalkernels.Sources()
	headers := map[string]string{}
	var files []string
	for name, text := range sources {
		if strings.HasSuffix(name, ".metal") {
			files = append(files, name)
		} else {
			headers[name] = text
		}
	}
	sort.Strings(files)
	out := make([]KernelFamily, 0, len(files))
	for _, f := range files {
		unit := map[string]string{f: sources[f]}
		for n, t := range headers {
			unit[n] = t
		}
		_, err := host.Compile(unit, host.Options{Threads: threads, PathPrefix: "metalkernels/"})
		out = append(out, KernelFamily{File: f, OK: err == nil, Error: errorText(err)})
	}
	return out
}
