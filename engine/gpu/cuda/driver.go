package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The CUDA driver API and NVRTC are loaded at run time with purego: a
// machine without them builds and runs everything else, and New says why it
// cannot open a device.

// Constants from cuda.h and nvrtc.h.
const (
	cuSuccess                     = 0
	cuMemAttachGlobal             = 1
	cuEventDefault                = 0
	cuStreamNonBlocking           = 1
	cuAttrComputeCapabilityMajor  = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	cuAttrComputeCapabilityMinor  = 76
	cuAttrConcurrentManagedAccess = 89 // CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS
	cuFuncAttrMaxThreadsPerBlock  = 0  // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	cuFuncAttrSharedSizeBytes     = 1  // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	cuFuncAttrNumRegs             = 4  // CU_FUNC_ATTRIBUTE_NUM_REGS
	nvrtcSuccess                  = 0
)

type api struct {
	cuInit, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute, cuDeviceTotalMem uintptr
	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease, cuCtxSetCurrent, cuCtxSynchronize         uintptr
	cuMemAllocManaged, cuMemAlloc, cuMemFree, cuMemGetInfo, cuMemsetD8, cuMemcpyHtoDAsync          uintptr
	cuMemcpyDtoDAsync                                                                              uintptr
	cuModuleLoadData, cuModuleGetFunction, cuFuncGetAttribute, cuLaunchKernel                      uintptr
	cuStreamCreate, cuStreamSynchronize, cuStreamDestroy                                           uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime, cuEventDestroy           uintptr
	cuGetErrorName, cuGetErrorString                                                               uintptr

	nvrtcCreateProgram, nvrtcDestroyProgram, nvrtcCompileProgram, nvrtcGetPTXSize, nvrtcGetPTX uintptr
	nvrtcGetProgramLogSize, nvrtcGetProgramLog, nvrtcGetErrorString, nvrtcVersion              uintptr
	nvrtcGetCUBINSize, nvrtcGetCUBIN                                                           uintptr
	nvrtcPath                                                                                  string
}

var (
	apiOnce sync.Once
	apiVal  *api
	apiErr  error
)

// libcudaNames are the driver's names, tried in order ($SUZURAN_LIBCUDA
// first).
func libcudaNames() []string {
	var n []string
	if p := os.Getenv("SUZURAN_LIBCUDA"); p != "" {
		n = append(n, p)
	}
	return append(n, "libcuda.so.1", "libcuda.so", "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1")
}

// nvrtcNames are NVRTC's: $SUZURAN_NVRTC, the loader's search path, the
// CUDA toolkit's usual folders, and a pip install of nvidia-cuda-nvrtc
// (which PyTorch brings).
func nvrtcNames() []string {
	var n []string
	if p := os.Getenv("SUZURAN_NVRTC"); p != "" {
		n = append(n, p)
	}
	n = append(n, "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2")
	var globs []string
	for _, root := range []string{"/usr/local/cuda", "/usr/local/cuda-*", "/opt/cuda"} {
		globs = append(globs, root+"/lib64/libnvrtc.so*", root+"/targets/*/lib/libnvrtc.so*")
	}
	globs = append(globs, "/usr/lib/x86_64-linux-gnu/libnvrtc.so*",
		"/usr/lib/python3*/site-packages/nvidia/cu*/lib/libnvrtc.so*",
		"/usr/local/lib/python3*/*-packages/nvidia/cu*/lib/libnvrtc.so*",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cu*/lib/libnvrtc.so*",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so*",
		"/usr/local/lib/python3*/*-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so*")
	for _, g := range globs {
		m, _ := filepath.Glob(g)
		sort.Sort(sort.Reverse(sort.StringSlice(m))) // newest version first
		for _, p := range m {
			if !strings.Contains(filepath.Base(p), "builtins") && !strings.Contains(filepath.Base(p), "alt") {
				n = append(n, p)
			}
		}
	}
	return n
}

func openFirst(names []string) (uintptr, string, error) {
	var errs []string
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, n, nil
		}
		errs = append(errs, err.Error())
	}
	if len(errs) > 3 {
		errs = errs[:3]
	}
	return 0, "", errors.New(strings.Join(errs, "; "))
}

// loadAPI loads the driver and NVRTC once.
func loadAPI() (*api, error) {
	apiOnce.Do(func() { apiVal, apiErr = loadAPIOnce() })
	return apiVal, apiErr
}

func loadAPIOnce() (*api, error) {
	if runtime.GOOS != "linux" && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("cuda: no CUDA driver on %s", runtime.GOOS)
	}
	cu, _, err := openFirst(libcudaNames())
	if err != nil {
		return nil, fmt.Errorf("cuda: no CUDA driver (libcuda.so.1) could be loaded: %v; install NVIDIA's driver or set SUZURAN_LIBCUDA", err)
	}
	a := &api{}
	sym := func(h uintptr, dst *uintptr, names ...string) error {
		for _, n := range names {
			if p, err := purego.Dlsym(h, n); err == nil {
				*dst = p
				return nil
			}
		}
		return fmt.Errorf("cuda: symbol %s missing", names[0])
	}
	var errs []error
	for _, s := range []struct {
		dst   *uintptr
		names []string
	}{
		{&a.cuInit, []string{"cuInit"}},
		{&a.cuDeviceGetCount, []string{"cuDeviceGetCount"}},
		{&a.cuDeviceGet, []string{"cuDeviceGet"}},
		{&a.cuDeviceGetName, []string{"cuDeviceGetName"}},
		{&a.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}},
		{&a.cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}},
		{&a.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}},
		{&a.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
		{&a.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}},
		{&a.cuCtxSynchronize, []string{"cuCtxSynchronize"}},
		{&a.cuMemAllocManaged, []string{"cuMemAllocManaged"}},
		{&a.cuMemAlloc, []string{"cuMemAlloc_v2"}},
		{&a.cuMemFree, []string{"cuMemFree_v2"}},
		{&a.cuMemGetInfo, []string{"cuMemGetInfo_v2"}},
		{&a.cuMemsetD8, []string{"cuMemsetD8_v2"}},
		{&a.cuMemcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}},
		{&a.cuMemcpyDtoDAsync, []string{"cuMemcpyDtoDAsync_v2"}},
		{&a.cuModuleLoadData, []string{"cuModuleLoadData"}},
		{&a.cuModuleGetFunction, []string{"cuModuleGetFunction"}},
		{&a.cuFuncGetAttribute, []string{"cuFuncGetAttribute"}},
		{&a.cuLaunchKernel, []string{"cuLaunchKernel"}},
		{&a.cuStreamCreate, []string{"cuStreamCreate"}},
		{&a.cuStreamSynchronize, []string{"cuStreamSynchronize"}},
		{&a.cuStreamDestroy, []string{"cuStreamDestroy_v2"}},
		{&a.cuEventCreate, []string{"cuEventCreate"}},
		{&a.cuEventRecord, []string{"cuEventRecord"}},
		{&a.cuEventSynchronize, []string{"cuEventSynchronize"}},
		{&a.cuEventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}},
		{&a.cuEventDestroy, []string{"cuEventDestroy_v2"}},
		{&a.cuGetErrorName, []string{"cuGetErrorName"}},
		{&a.cuGetErrorString, []string{"cuGetErrorString"}},
	} {
		if err := sym(cu, s.dst, s.names...); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := a.loadNVRTC(); err != nil {
		return nil, err
	}
	return a, nil
}

// loadNVRTC loads NVRTC alone (it needs no GPU), for compiling the kernels.
func (a *api) loadNVRTC() error {
	h, path, err := openFirst(nvrtcNames())
	if err == nil {
		preloadBuiltins(path)
	}
	if err != nil {
		return fmt.Errorf("cuda: NVRTC (libnvrtc.so) could not be loaded: %v; install the CUDA toolkit or pip's nvidia-cuda-nvrtc, or set SUZURAN_NVRTC to the library", err)
	}
	a.nvrtcPath = path
	for _, s := range []struct {
		dst  *uintptr
		name string
	}{
		{&a.nvrtcCreateProgram, "nvrtcCreateProgram"},
		{&a.nvrtcDestroyProgram, "nvrtcDestroyProgram"},
		{&a.nvrtcCompileProgram, "nvrtcCompileProgram"},
		{&a.nvrtcGetPTXSize, "nvrtcGetPTXSize"},
		{&a.nvrtcGetPTX, "nvrtcGetPTX"},
		{&a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize"},
		{&a.nvrtcGetProgramLog, "nvrtcGetProgramLog"},
		{&a.nvrtcGetErrorString, "nvrtcGetErrorString"},
		{&a.nvrtcVersion, "nvrtcVersion"},
	} {
		p, err := purego.Dlsym(h, s.name)
		if err != nil {
			return fmt.Errorf("cuda: %s: symbol %s missing", path, s.name)
		}
		*s.dst = p
	}
	a.nvrtcGetCUBINSize, _ = purego.Dlsym(h, "nvrtcGetCUBINSize")
	a.nvrtcGetCUBIN, _ = purego.Dlsym(h, "nvrtcGetCUBIN")
	return nil
}

// preloadBuiltins loads libnvrtc-builtins from NVRTC's own folder, which
// NVRTC opens by name at its first compile: a pip install's folder is not
// on the loader's path.
func preloadBuiltins(nvrtc string) {
	dir := filepath.Dir(nvrtc)
	if !filepath.IsAbs(nvrtc) {
		return
	}
	m, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so*"))
	sort.Sort(sort.Reverse(sort.StringSlice(m)))
	for _, p := range m {
		if _, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return
		}
	}
}

var (
	nvrtcOnce sync.Once
	nvrtcVal  *api
	nvrtcErr  error
)

// loadNVRTCOnly loads NVRTC without the driver (compiling needs no GPU).
func loadNVRTCOnly() (*api, error) {
	nvrtcOnce.Do(func() {
		a := &api{}
		if err := a.loadNVRTC(); err != nil {
			nvrtcErr = err
			return
		}
		nvrtcVal = a
	})
	return nvrtcVal, nvrtcErr
}

// call is purego.SyscallN for calls returning a C int; like it, it moves
// what an argument's unsafe.Pointer conversion points at to the heap and
// keeps it alive for the call.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) int {
	r, _, _ := purego.SyscallN(fn, args...)
	return int(int32(uint32(r)))
}

func cstring(p uintptr) string {
	if p == 0 {
		return ""
	}
	var b []byte
	for i := 0; ; i++ {
		c := *(*byte)(unsafe.Add(nil, p+uintptr(i)))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// check turns a CUresult into an error naming the call.
func (a *api) check(what string, r int) error {
	if r == cuSuccess {
		return nil
	}
	var name, msg uintptr
	call(a.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&name)))
	call(a.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&msg)))
	return fmt.Errorf("cuda: %s: %s (%d): %s", what, cstring(name), r, cstring(msg))
}

func cbytes(s string) *byte {
	b := append([]byte(s), 0)
	return &b[0]
}
