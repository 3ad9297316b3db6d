package cuda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/suzuran-app/suzuran/metalkernels/host"
)

//go:embed shim/cuda_metal.h
var shimHeader string

// metalHeaders are the <metal_…> names a kernel may include; each maps to
// the shim, which every unit includes first.
var metalHeaders = []string{"metal_stdlib", "metal_atomic", "metal_common", "metal_compute", "metal_math",
	"metal_simdgroup", "metal_simdgroup_matrix", "metal_integer", "metal_geometric", "metal_relational",
	"metal_type_traits", "metal_limits", "metal_numeric", "metal_pack", "metal_quadgroup", "metal_uniform",
	"metal_matrix", "metal_functional"}

// tgVarRe matches the emulator pass's rewrite of a threadgroup variable,
// `auto& name = ::emu::tg_var<T[dims]>()`, which CUDA spells as a
// __shared__ declaration.
var tgVarRe = regexp.MustCompile(`auto& ([A-Za-z_][A-Za-z0-9_]*) = ::emu::tg_var<(.+?)((?:\[[^\]]*\])*)>\(\)`)

// cudaUnit is one .metal file as CUDA source, with its kernels.
type cudaUnit struct {
	name    string
	text    string
	kernels []host.KernelEntry
}

// translate turns the MSL sources into CUDA translation units: the pass's
// output with threadgroup variables as __shared__ and one extern "C"
// __global__ entry per kernel, cu_k_<host name>, which takes the argument
// table by value.
func translate(sources map[string]string, prefix string) (units []cudaUnit, headers map[string]string, err error) {
	tr, err := host.Translate(sources, host.Options{PathPrefix: prefix})
	if err != nil {
		return nil, nil, err
	}
	headers = map[string]string{"cuda_metal.h": shimHeader}
	for _, n := range metalHeaders {
		headers[n] = "#pragma once\n"
	}
	for n, t := range tr.Headers {
		headers[n] = sharedVars(t)
	}
	for _, u := range tr.Units {
		var b strings.Builder
		fmt.Fprintf(&b, "#include \"cuda_metal.h\"\n#line 1 \"%s%s\"\n%s\n", prefix, u.Name, sharedVars(u.Text))
		b.WriteString("\n#line 1 \"cuda entry points\"\n")
		for _, k := range u.Kernels {
			var args []string
			for _, p := range k.Params {
				switch p.Attr {
				case "buffer":
					args = append(args, fmt.Sprintf("::emu::buf(a, %d)", p.Index))
				case "threadgroup":
					args = append(args, fmt.Sprintf("::emu::tgbuf(a, %d)", p.Index))
				default:
					args = append(args, "::emu::pos(::emu::"+positionAttr(p.Attr)+")")
				}
			}
			maxT := k.MaxThreads
			if maxT == 0 {
				maxT = 1024
			}
			fmt.Fprintf(&b, "extern \"C\" __global__ void __launch_bounds__(%d) cu_k_%s(const ::emu::Args a) { %s(%s); }\n",
				maxT, k.Host, k.Call, strings.Join(args, ", "))
		}
		units = append(units, cudaUnit{name: u.Name, text: b.String(), kernels: u.Kernels})
	}
	return units, headers, nil
}

func sharedVars(text string) string {
	return tgVarRe.ReplaceAllString(text, "__shared__ $2 $1$3")
}

// positionAttr maps a position attribute to the shim's enumerator, as the
// emulator's generator does.
func positionAttr(a string) string {
	switch a {
	case "thread_position_in_grid":
		return "kThreadPositionInGrid"
	case "threadgroup_position_in_grid":
		return "kThreadgroupPositionInGrid"
	case "thread_position_in_threadgroup":
		return "kThreadPositionInThreadgroup"
	case "thread_index_in_threadgroup":
		return "kThreadIndexInThreadgroup"
	case "threads_per_threadgroup", "dispatch_threads_per_threadgroup":
		return "kThreadsPerThreadgroup"
	case "threadgroups_per_grid":
		return "kThreadgroupsPerGrid"
	case "threads_per_grid", "grid_size":
		return "kThreadsPerGrid"
	case "simdgroup_index_in_threadgroup":
		return "kSimdgroupIndexInThreadgroup"
	case "thread_index_in_simdgroup":
		return "kThreadIndexInSimdgroup"
	case "simdgroups_per_threadgroup", "dispatch_simdgroups_per_threadgroup":
		return "kSimdgroupsPerThreadgroup"
	case "threads_per_simdgroup":
		return "kThreadsPerSimdgroup"
	case "thread_index_in_quadgroup":
		return "kThreadIndexInQuadgroup"
	case "quadgroup_index_in_threadgroup":
		return "kQuadgroupIndexInThreadgroup"
	}
	return "kThreadPositionInGrid"
}

// nvrtcOptions are the flags every unit is compiled with: C++17, every
// function a device function (the MSL names no execution space), no fused
// multiply-add behind the kernel's back (the emulator and the Go references
// compute a·b + c unfused; fma() stays available), line info for the
// sanitizers' reports.
func nvrtcOptions(arch string) []string {
	return []string{"--std=c++17", "-default-device", "--fmad=false", "-lineinfo", "--gpu-architecture=" + arch,
		"-w", "-DSUZURAN_CUDA=1"}
}

// compileUnit compiles one unit with NVRTC into PTX (or a cubin when arch
// is sm_XY and NVRTC can).
func (a *api) compileUnit(u cudaUnit, headers map[string]string, arch string) ([]byte, error) {
	var names []string
	for n := range headers {
		names = append(names, n)
	}
	sort.Strings(names)
	var hsrc, hname []*byte
	for _, n := range names {
		hsrc = append(hsrc, cbytes(headers[n]))
		hname = append(hname, cbytes(n))
	}
	var prog uintptr
	src := cbytes(u.text)
	name := cbytes(u.name + ".cu")
	if r := call(a.nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(src)), uintptr(unsafe.Pointer(name)),
		uintptr(len(names)), uintptr(unsafe.Pointer(&hsrc[0])), uintptr(unsafe.Pointer(&hname[0]))); r != nvrtcSuccess {
		return nil, fmt.Errorf("cuda: nvrtcCreateProgram(%s): %s", u.name, a.nvrtcError(r))
	}
	defer call(a.nvrtcDestroyProgram, uintptr(unsafe.Pointer(&prog)))
	opts := nvrtcOptions(arch)
	var copts []*byte
	for _, o := range opts {
		copts = append(copts, cbytes(o))
	}
	r := call(a.nvrtcCompileProgram, prog, uintptr(len(copts)), uintptr(unsafe.Pointer(&copts[0])))
	runtime.KeepAlive(copts)
	runtime.KeepAlive(hsrc)
	runtime.KeepAlive(hname)
	runtime.KeepAlive(src)
	runtime.KeepAlive(name)
	var logSize uintptr
	call(a.nvrtcGetProgramLogSize, prog, uintptr(unsafe.Pointer(&logSize)))
	log := ""
	if logSize > 1 {
		buf := make([]byte, logSize)
		call(a.nvrtcGetProgramLog, prog, uintptr(unsafe.Pointer(&buf[0])))
		log = strings.TrimRight(string(buf[:logSize-1]), "\n")
	}
	if r != nvrtcSuccess {
		if len(log) > 16000 {
			log = log[:16000] + "\n…"
		}
		return nil, fmt.Errorf("cuda: NVRTC (%s) failed on %s: %s\n%s", a.nvrtcPath, u.name, a.nvrtcError(r), log)
	}
	if strings.HasPrefix(arch, "sm_") && a.nvrtcGetCUBINSize != 0 {
		var n uintptr
		if call(a.nvrtcGetCUBINSize, prog, uintptr(unsafe.Pointer(&n))) == nvrtcSuccess && n > 0 {
			out := make([]byte, n)
			if call(a.nvrtcGetCUBIN, prog, uintptr(unsafe.Pointer(&out[0]))) == nvrtcSuccess {
				return out, nil
			}
		}
	}
	var n uintptr
	if r := call(a.nvrtcGetPTXSize, prog, uintptr(unsafe.Pointer(&n))); r != nvrtcSuccess {
		return nil, fmt.Errorf("cuda: nvrtcGetPTXSize: %s", a.nvrtcError(r))
	}
	out := make([]byte, n)
	if r := call(a.nvrtcGetPTX, prog, uintptr(unsafe.Pointer(&out[0]))); r != nvrtcSuccess {
		return nil, fmt.Errorf("cuda: nvrtcGetPTX: %s", a.nvrtcError(r))
	}
	return out, nil
}

func (a *api) nvrtcError(r int) string {
	return cstring(call2(a.nvrtcGetErrorString, uintptr(r)))
}

//go:uintptrescapes
func call2(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

func hashText(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}
