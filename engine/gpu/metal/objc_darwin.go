//go:build darwin

package metal

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// Paths of the system libraries this package loads.
const (
	libobjcPath      = "/usr/lib/libobjc.A.dylib"
	libSystemPath    = "/usr/lib/libSystem.B.dylib"
	metalPath        = "/System/Library/Frameworks/Metal.framework/Metal"
	coreGraphicsPath = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"
)

// Constants from the Metal and Foundation headers (values checked against
// Apple's metal-cpp headers: MTLResource.hpp, MTLCommandBuffer.hpp,
// MTLCommandEncoder.hpp, MTLLibrary.hpp, NSString.hpp).
const (
	resourceStorageModeShared = 0 // MTLResourceStorageModeShared | MTLResourceCPUCacheModeDefaultCache
	dispatchTypeConcurrent    = 1 // MTLDispatchTypeConcurrent
	barrierScopeBuffers       = 1 // MTLBarrierScopeBuffers
	languageVersion3_1        = 0x30001
	commandBufferStatusError  = 5    // MTLCommandBufferStatusError
	simdWidth                 = 32   // lanes per SIMD group the kernels are written for
	gpuFamilyApple1           = 1001 // MTLGPUFamilyApple1
	gpuFamilyApple7           = 1007 // MTLGPUFamilyApple7: M1 and later
	gpuFamilyAppleNewest      = 1010 // MTLGPUFamilyApple10 (M5); older systems answer NO
	nsUTF8StringEncoding      = 4
)

// symbols holds the C entry points, loaded once.
var symbols struct {
	once                      sync.Once
	err                       error
	msgSend                   uintptr
	pthreadSelf               uintptr
	createSystemDefaultDevice uintptr
	copyAllDevices            uintptr
}

// classes and selectors are registered once after the frameworks are loaded.
var (
	classNSString          objc.Class
	classNSAutoreleasePool objc.Class
	classMTLCompileOptions objc.Class

	selAlloc, selNew, selRelease, selRetain, selDrain               objc.SEL
	selInitWithBytesLengthEncoding, selUTF8String                   objc.SEL
	selLengthOfBytesUsingEncoding, selLocalizedDescription          objc.SEL
	selCount, selObjectAtIndex                                      objc.SEL
	selName, selMaxBufferLength, selNewCommandQueue                 objc.SEL
	selNewBufferWithLengthOptions, selNewBufferWithBytesNoCopy      objc.SEL
	selContents, selLength                                          objc.SEL
	selSetLanguageVersion, selNewLibraryWithSource                  objc.SEL
	selNewFunctionWithName, selNewComputePipelineState              objc.SEL
	selMaxTotalThreadsPerThreadgroup, selThreadExecutionWidth       objc.SEL
	selCommandBuffer, selComputeCommandEncoderWithDispatchType      objc.SEL
	selSetComputePipelineState, selSetBufferOffsetAtIndex           objc.SEL
	selSetBytesLengthAtIndex, selSetThreadgroupMemoryLength         objc.SEL
	selDispatchThreadgroups, selMemoryBarrierWithScope              objc.SEL
	selEndEncoding, selCommit, selWaitUntilCompleted                objc.SEL
	selStatus, selError, selFunctionNames                           objc.SEL
	selSupportsFamily                                               objc.SEL
	selMaxThreadgroupMemoryLength, selStaticThreadgroupMemoryLength objc.SEL
	selRecommendedMaxWorkingSetSize                                 objc.SEL
)

// loadSymbols opens libobjc, CoreGraphics and Metal and resolves what this
// package calls. CoreGraphics is loaded first because
// MTLCreateSystemDefaultDevice finds no GPU in a process that has not loaded
// it (Apple documents the requirement; command-line tools hit it).
func loadSymbols() error {
	symbols.once.Do(func() { symbols.err = loadSymbolsOnce() })
	return symbols.err
}

func loadSymbolsOnce() error {
	libobjc, err := purego.Dlopen(libobjcPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("metal: loading %s: %w", libobjcPath, err)
	}
	if symbols.msgSend, err = purego.Dlsym(libobjc, "objc_msgSend"); err != nil {
		return fmt.Errorf("metal: %s: %w", libobjcPath, err)
	}
	libSystem, err := purego.Dlopen(libSystemPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("metal: loading %s: %w", libSystemPath, err)
	}
	if symbols.pthreadSelf, err = purego.Dlsym(libSystem, "pthread_self"); err != nil {
		return fmt.Errorf("metal: %s: %w", libSystemPath, err)
	}
	if _, err := purego.Dlopen(coreGraphicsPath, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return fmt.Errorf("metal: loading %s: %w", coreGraphicsPath, err)
	}
	mtl, err := purego.Dlopen(metalPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("metal: loading %s (Metal needs macOS on Apple Silicon or a Metal-capable GPU): %w", metalPath, err)
	}
	if symbols.createSystemDefaultDevice, err = purego.Dlsym(mtl, "MTLCreateSystemDefaultDevice"); err != nil {
		return fmt.Errorf("metal: %s: %w", metalPath, err)
	}
	if symbols.copyAllDevices, err = purego.Dlsym(mtl, "MTLCopyAllDevices"); err != nil {
		return fmt.Errorf("metal: %s: %w", metalPath, err)
	}

	// Metal links Foundation, so its classes exist from here on.
	classNSString = objc.GetClass("NSString")
	classNSAutoreleasePool = objc.GetClass("NSAutoreleasePool")
	classMTLCompileOptions = objc.GetClass("MTLCompileOptions")
	if classNSString == 0 || classNSAutoreleasePool == 0 || classMTLCompileOptions == 0 {
		return errors.New("metal: the Objective-C classes NSString, NSAutoreleasePool or MTLCompileOptions are missing after loading Metal.framework")
	}

	sels := []struct {
		sel  *objc.SEL
		name string
	}{
		{&selAlloc, "alloc"},
		{&selNew, "new"},
		{&selRelease, "release"},
		{&selRetain, "retain"},
		{&selDrain, "drain"},
		{&selInitWithBytesLengthEncoding, "initWithBytes:length:encoding:"},
		{&selUTF8String, "UTF8String"},
		{&selLengthOfBytesUsingEncoding, "lengthOfBytesUsingEncoding:"},
		{&selLocalizedDescription, "localizedDescription"},
		{&selCount, "count"},
		{&selObjectAtIndex, "objectAtIndex:"},
		{&selName, "name"},
		{&selMaxBufferLength, "maxBufferLength"},
		{&selRecommendedMaxWorkingSetSize, "recommendedMaxWorkingSetSize"},
		{&selNewCommandQueue, "newCommandQueue"},
		{&selNewBufferWithLengthOptions, "newBufferWithLength:options:"},
		{&selNewBufferWithBytesNoCopy, "newBufferWithBytesNoCopy:length:options:deallocator:"},
		{&selContents, "contents"},
		{&selLength, "length"},
		{&selSetLanguageVersion, "setLanguageVersion:"},
		{&selNewLibraryWithSource, "newLibraryWithSource:options:error:"},
		{&selNewFunctionWithName, "newFunctionWithName:"},
		{&selNewComputePipelineState, "newComputePipelineStateWithFunction:error:"},
		{&selMaxTotalThreadsPerThreadgroup, "maxTotalThreadsPerThreadgroup"},
		{&selThreadExecutionWidth, "threadExecutionWidth"},
		{&selCommandBuffer, "commandBuffer"},
		{&selComputeCommandEncoderWithDispatchType, "computeCommandEncoderWithDispatchType:"},
		{&selSetComputePipelineState, "setComputePipelineState:"},
		{&selSetBufferOffsetAtIndex, "setBuffer:offset:atIndex:"},
		{&selSetBytesLengthAtIndex, "setBytes:length:atIndex:"},
		{&selSetThreadgroupMemoryLength, "setThreadgroupMemoryLength:atIndex:"},
		{&selDispatchThreadgroups, "dispatchThreadgroups:threadsPerThreadgroup:"},
		{&selMemoryBarrierWithScope, "memoryBarrierWithScope:"},
		{&selEndEncoding, "endEncoding"},
		{&selCommit, "commit"},
		{&selWaitUntilCompleted, "waitUntilCompleted"},
		{&selStatus, "status"},
		{&selError, "error"},
		{&selFunctionNames, "functionNames"},
		{&selSupportsFamily, "supportsFamily:"},
		{&selMaxThreadgroupMemoryLength, "maxThreadgroupMemoryLength"},
		{&selStaticThreadgroupMemoryLength, "staticThreadgroupMemoryLength"},
	}
	for _, s := range sels {
		*s.sel = objc.RegisterName(s.name)
	}
	return nil
}

// send calls objc_msgSend(id, sel, args...) with every argument in an
// integer register (arm64 passes up to eight: self, _cmd and six more, which
// covers every method this package calls). It returns x0. Pointers passed
// as uintptr are kept alive and unmoved for the call by go:uintptrescapes.
//
//go:uintptrescapes
func send(id objc.ID, sel objc.SEL, args ...uintptr) uintptr {
	f := symbols.msgSend
	var r uintptr
	switch len(args) {
	case 0:
		r, _, _ = purego.SyscallN(f, uintptr(id), uintptr(sel))
	case 1:
		r, _, _ = purego.SyscallN(f, uintptr(id), uintptr(sel), args[0])
	case 2:
		r, _, _ = purego.SyscallN(f, uintptr(id), uintptr(sel), args[0], args[1])
	case 3:
		r, _, _ = purego.SyscallN(f, uintptr(id), uintptr(sel), args[0], args[1], args[2])
	case 4:
		r, _, _ = purego.SyscallN(f, uintptr(id), uintptr(sel), args[0], args[1], args[2], args[3])
	default:
		panic(fmt.Sprintf("metal: send with %d arguments; this package passes at most 4", len(args)))
	}
	return r
}

// sendID is send for methods that return an object.
//
//go:uintptrescapes
func sendID(id objc.ID, sel objc.SEL, args ...uintptr) objc.ID {
	return objc.ID(send(id, sel, args...))
}

// pointerAt turns an address returned by Objective-C into a Go pointer. The
// memory belongs to Objective-C (a buffer's contents, a C string), never to
// the Go heap; the indirection keeps vet's unsafeptr check, which cannot know
// that, from flagging the conversion.
func pointerAt(addr uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

// threadID is the calling OS thread's pthread_t.
func threadID() uintptr {
	r, _, _ := purego.SyscallN(symbols.pthreadSelf)
	return r
}

// newPool pushes an autorelease pool on the calling thread. The caller must
// be locked to its OS thread until drainPool.
func newPool() objc.ID { return sendID(objc.ID(classNSAutoreleasePool), selNew) }

// drainPool pops the pool and releases what was autoreleased inside it.
func drainPool(pool objc.ID) { send(pool, selDrain) }

// newNSString makes a +1 retained NSString holding s; release it when done.
func newNSString(s string) objc.ID {
	n := len(s)
	b := []byte(s)
	if n == 0 {
		b = []byte{0} // a valid address for a zero-length string
	}
	// The pointer is converted in the call itself so that go:uintptrescapes
	// keeps b in place; initWithBytes:length:encoding: copies the bytes.
	return sendID(sendID(objc.ID(classNSString), selAlloc), selInitWithBytesLengthEncoding,
		uintptr(unsafe.Pointer(&b[0])), uintptr(n), nsUTF8StringEncoding)
}

// goString copies an NSString into Go. It must run inside an autorelease
// pool: UTF8String's storage is autoreleased.
func goString(str objc.ID) string {
	if str == 0 {
		return ""
	}
	n := int(send(str, selLengthOfBytesUsingEncoding, nsUTF8StringEncoding))
	p := send(str, selUTF8String)
	if p == 0 || n == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(pointerAt(p)), n))
}

// nsError turns an NSError into a Go error carrying its localized
// description (for a compile failure that is the compiler's log). It must run
// inside an autorelease pool.
func nsError(e objc.ID) error {
	if e == 0 {
		return nil
	}
	return errors.New(goString(sendID(e, selLocalizedDescription)))
}
