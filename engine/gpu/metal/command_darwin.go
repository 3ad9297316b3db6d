//go:build darwin

package metal

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego/objc"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// Limits Metal places on compute arguments.
const (
	maxSetBytesLength   = 4096 // setBytes:length:atIndex: is for data up to 4 KiB
	threadgroupMemAlign = 16   // setThreadgroupMemoryLength must be a multiple of 16
)

// mtlSize is MTLSize: three NSUIntegers.
type mtlSize struct{ width, height, depth uint64 }

// commandBuffer records into one concurrent compute encoder.
//
// Recording happens inside an autorelease pool on a locked OS thread, from
// NewCommandBuffer to Commit: the objects Metal hands back during encoding
// are autoreleased, and the pool drains them once per step. Autorelease
// pools belong to a thread and nest, so only one command buffer of a device
// is recorded at a time and Commit must come from the goroutine that called
// NewCommandBuffer; both are checked.
type commandBuffer struct {
	dev    *Device
	cb     objc.ID
	enc    objc.ID
	pool   objc.ID
	thread uintptr

	// sizes is where dispatchThreadgroups' two MTLSize arguments are built:
	// heap memory owned by the command buffer, whose addresses are passed as
	// the arm64 calling convention passes a composite larger than 16 bytes.
	sizes *[2]mtlSize

	err       error // first recording error; Commit then submits nothing
	committed bool
	waited    bool
	waitErr   error
}

// NewCommandBuffer starts recording a step.
func (d *Device) NewCommandBuffer() (device.CommandBuffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("metal: NewCommandBuffer on a closed device")
	}
	if d.recording {
		return nil, errors.New("metal: NewCommandBuffer while another command buffer is being recorded; Commit it first")
	}
	runtime.LockOSThread()
	pool := newPool()
	cb := sendID(d.queue, selCommandBuffer)
	if cb == 0 {
		drainPool(pool)
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("metal: %s: the command queue returned no command buffer", d.name)
	}
	send(cb, selRetain)
	enc := sendID(cb, selComputeCommandEncoderWithDispatchType, dispatchTypeConcurrent)
	if enc == 0 {
		send(cb, selRelease)
		drainPool(pool)
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("metal: %s: the command buffer returned no compute encoder", d.name)
	}
	send(enc, selRetain)
	d.recording = true
	return &commandBuffer{
		dev:    d,
		cb:     cb,
		enc:    enc,
		pool:   pool,
		thread: threadID(),
		sizes:  new([2]mtlSize),
	}, nil
}

func (c *commandBuffer) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("metal: "+format, args...)
	}
}

// Dispatch encodes one kernel launch. An invalid dispatch is not encoded:
// the error is kept, nothing of this command buffer is submitted, and Wait
// returns it.
func (c *commandBuffer) Dispatch(d device.Dispatch) {
	if c.err != nil {
		return
	}
	if c.committed {
		c.fail("Dispatch after Commit")
		return
	}
	p, ok := d.Pipeline.(*pipeline)
	if !ok || p == nil || p.dev != c.dev {
		c.fail("Dispatch with a pipeline that is not from this Metal device")
		return
	}
	tg, th := d.Threadgroups, d.Threads
	if tg.X <= 0 || tg.Y <= 0 || tg.Z <= 0 || th.X <= 0 || th.Y <= 0 || th.Z <= 0 {
		c.fail("kernel %s: grid %v threadgroups of %v threads: every dimension must be at least 1", p.name, tg, th)
		return
	}
	if n := th.X * th.Y * th.Z; n > p.maxThreads {
		c.fail("kernel %s: %d threads per threadgroup, over this pipeline's limit of %d", p.name, n, p.maxThreads)
		return
	}
	send(c.enc, selSetComputePipelineState, uintptr(p.state))
	for _, a := range d.Args {
		if !c.setArg(p, a) {
			return
		}
	}
	c.sizes[0] = mtlSize{uint64(tg.X), uint64(tg.Y), uint64(tg.Z)}
	c.sizes[1] = mtlSize{uint64(th.X), uint64(th.Y), uint64(th.Z)}
	send(c.enc, selDispatchThreadgroups, uintptr(unsafe.Pointer(&c.sizes[0])), uintptr(unsafe.Pointer(&c.sizes[1])))
}

// setArg binds one argument; it reports false after recording an error.
func (c *commandBuffer) setArg(p *pipeline, a device.Arg) bool {
	set := 0
	if a.Buffer != nil {
		set++
	}
	if a.Bytes != nil {
		set++
	}
	if a.Threadgroup > 0 {
		set++
	}
	if set != 1 || a.Index < 0 {
		c.fail("kernel %s: argument %d must set exactly one of Buffer, Bytes and Threadgroup", p.name, a.Index)
		return false
	}
	switch {
	case a.Buffer != nil:
		b, ok := a.Buffer.(*buffer)
		if !ok || b.dev != c.dev || b.id == 0 {
			c.fail("kernel %s: argument %d: the buffer is not a live buffer of this Metal device", p.name, a.Index)
			return false
		}
		if a.Offset < 0 || a.Offset >= b.length {
			c.fail("kernel %s: argument %d: offset %d outside the %d-byte buffer", p.name, a.Index, a.Offset, b.length)
			return false
		}
		send(c.enc, selSetBufferOffsetAtIndex, uintptr(b.id), uintptr(a.Offset), uintptr(a.Index))
	case a.Bytes != nil:
		if len(a.Bytes) == 0 || len(a.Bytes) > maxSetBytesLength {
			c.fail("kernel %s: argument %d: %d bytes of constant data; setBytes takes 1 to %d, use a buffer for more", p.name, a.Index, len(a.Bytes), maxSetBytesLength)
			return false
		}
		// setBytes copies the data into the command buffer before returning.
		send(c.enc, selSetBytesLengthAtIndex, uintptr(unsafe.Pointer(&a.Bytes[0])), uintptr(len(a.Bytes)), uintptr(a.Index))
	default:
		n := (a.Threadgroup + threadgroupMemAlign - 1) / threadgroupMemAlign * threadgroupMemAlign
		send(c.enc, selSetThreadgroupMemoryLength, uintptr(n), uintptr(a.Index))
	}
	return true
}

// Barrier makes every buffer write of the dispatches before it visible to
// the dispatches after it; without one, the concurrent encoder may overlap
// them.
func (c *commandBuffer) Barrier() {
	if c.err != nil || c.committed {
		return
	}
	send(c.enc, selMemoryBarrierWithScope, barrierScopeBuffers)
}

// Commit ends encoding, submits the work (unless recording failed) and
// drains the step's autorelease pool. It returns at once.
func (c *commandBuffer) Commit() {
	if c.committed {
		return
	}
	if threadID() != c.thread {
		// Draining the pool here would pop another thread's pools: a
		// programming error in the caller, not a condition to recover from.
		panic("metal: Commit from a different goroutine than NewCommandBuffer; record and commit a command buffer on one goroutine")
	}
	c.committed = true
	send(c.enc, selEndEncoding)
	if c.err == nil {
		send(c.cb, selCommit)
	}
	drainPool(c.pool)
	c.pool = 0
	runtime.UnlockOSThread()
	c.dev.mu.Lock()
	c.dev.recording = false
	c.dev.mu.Unlock()
}

// Wait blocks until the GPU has finished the command buffer and returns its
// error: a recording error, or the command buffer's NSError when its status
// is MTLCommandBufferStatusError (a fault, a timeout, a page fault on a
// buffer).
func (c *commandBuffer) Wait() error {
	if c.waited {
		return c.waitErr
	}
	if !c.committed {
		return errors.New("metal: Wait before Commit")
	}
	c.waited = true
	c.waitErr = c.wait()
	send(c.enc, selRelease)
	send(c.cb, selRelease)
	c.enc, c.cb = 0, 0
	return c.waitErr
}

func (c *commandBuffer) wait() error {
	if c.err != nil {
		return c.err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := newPool()
	defer drainPool(pool)
	send(c.cb, selWaitUntilCompleted)
	if st := send(c.cb, selStatus); st == commandBufferStatusError {
		err := nsError(sendID(c.cb, selError))
		if err == nil {
			err = errors.New("no error object")
		}
		return fmt.Errorf("metal: %s: command buffer failed: %w", c.dev.name, err)
	}
	return nil
}
