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

// mtlSize is MTLSize: three NSUIntegers.
type mtlSize struct{ width, height, depth uint64 }

// commandBuffer records into one concurrent compute encoder.
//
// Recording happens inside an autorelease pool on a locked OS thread, from
// NewCommandBuffer to Commit or Discard: the objects Metal hands back during
// encoding are autoreleased, and the pool drains them once per step.
// Autorelease pools belong to a thread and nest, so only one command buffer
// of a device is recorded at a time and Commit or Discard must come from the
// goroutine that called NewCommandBuffer; both are checked. Every way out of
// recording — Commit, Discard (after a recording error, or from a deferred
// call while a panic unwinds) — ends the encoder, drains the pool, unlocks
// the thread and clears the device's recording flag.
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
	committed bool  // Commit or Discard was called: recording has ended
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
		return nil, errors.New("metal: NewCommandBuffer while another command buffer is being recorded; Commit or Discard it first")
	}
	runtime.LockOSThread()
	pool := newPool()
	var cb, enc objc.ID
	ok := false
	defer func() {
		// Any way out but success (an error, a panic) releases what was
		// made, drains the pool and unlocks the thread.
		if ok {
			return
		}
		if enc != 0 {
			send(enc, selEndEncoding)
			send(enc, selRelease)
		}
		if cb != 0 {
			send(cb, selRelease)
		}
		drainPool(pool)
		runtime.UnlockOSThread()
	}()
	if cb = sendID(d.queue, selCommandBuffer); cb == 0 {
		return nil, fmt.Errorf("metal: %s: the command queue returned no command buffer", d.name)
	}
	send(cb, selRetain)
	if enc = sendID(cb, selComputeCommandEncoderWithDispatchType, dispatchTypeConcurrent); enc == 0 {
		return nil, fmt.Errorf("metal: %s: the command buffer returned no compute encoder", d.name)
	}
	send(enc, selRetain)
	c := &commandBuffer{
		dev:    d,
		cb:     cb,
		enc:    enc,
		pool:   pool,
		thread: threadID(),
		sizes:  new([2]mtlSize),
	}
	d.recording = true
	ok = true
	return c, nil
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
	// Every argument is checked before the first is bound: an index past
	// the argument table or threadgroup memory past the GPU's would
	// otherwise reach Metal, whose validation layer is off in a release
	// app, and fault on the GPU or corrupt memory.
	if err := d.Validate(p.staticThreadgroup, c.dev.maxThreadgroup); err != nil {
		c.fail("%v", err)
		return
	}
	for _, a := range d.Args {
		if b, ok := a.Buffer.(*buffer); a.Buffer != nil && (!ok || b.dev != c.dev || b.id == 0) {
			c.fail("kernel %s: [[buffer(%d)]]: the buffer is not a live buffer of this Metal device", p.name, a.Index)
			return
		}
	}
	send(c.enc, selSetComputePipelineState, uintptr(p.state))
	for _, a := range d.Args {
		c.setArg(a)
	}
	c.sizes[0] = mtlSize{uint64(tg.X), uint64(tg.Y), uint64(tg.Z)}
	c.sizes[1] = mtlSize{uint64(th.X), uint64(th.Y), uint64(th.Z)}
	send(c.enc, selDispatchThreadgroups, uintptr(unsafe.Pointer(&c.sizes[0])), uintptr(unsafe.Pointer(&c.sizes[1])))
}

// setArg binds one argument that Dispatch has validated.
func (c *commandBuffer) setArg(a device.Arg) {
	switch {
	case a.Buffer != nil:
		send(c.enc, selSetBufferOffsetAtIndex, uintptr(a.Buffer.(*buffer).id), uintptr(a.Offset), uintptr(a.Index))
	case a.Bytes != nil:
		// setBytes copies the data into the command buffer before returning.
		send(c.enc, selSetBytesLengthAtIndex, uintptr(unsafe.Pointer(&a.Bytes[0])), uintptr(len(a.Bytes)), uintptr(a.Index))
	default:
		send(c.enc, selSetThreadgroupMemoryLength, uintptr(device.RoundThreadgroup(a.Threadgroup)), uintptr(a.Index))
	}
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
	c.end(false)
}

// Discard ends encoding without submitting anything, releases the command
// buffer and its encoder, drains the step's autorelease pool and unlocks
// the thread. Wait then returns the recording error, or says the command
// buffer was discarded.
func (c *commandBuffer) Discard() {
	c.end(true)
}

// end is Commit (discard false) and Discard. Whatever happens in between,
// the pool is drained, the thread unlocked and the device's recording flag
// cleared.
func (c *commandBuffer) end(discard bool) {
	if c.committed {
		return
	}
	if threadID() != c.thread {
		// Draining the pool here would pop another thread's pools: a
		// programming error in the caller, not a condition to recover from.
		panic("metal: Commit or Discard from a different goroutine than NewCommandBuffer; record and commit a command buffer on one goroutine")
	}
	c.committed = true
	defer func() {
		drainPool(c.pool)
		c.pool = 0
		runtime.UnlockOSThread()
		c.dev.mu.Lock()
		c.dev.recording = false
		c.dev.mu.Unlock()
	}()
	// Metal requires endEncoding before the encoder is released or the
	// command buffer committed, even when nothing is submitted.
	send(c.enc, selEndEncoding)
	if discard || c.err != nil {
		if c.err == nil {
			c.err = errors.New("metal: the command buffer was discarded, nothing ran")
		}
		// Never committed: drop it now rather than in Wait, which a
		// caller abandoning a step may never call.
		c.release()
		return
	}
	send(c.cb, selCommit)
}

// release drops the command buffer and its encoder (both retained by
// NewCommandBuffer).
func (c *commandBuffer) release() {
	if c.enc != 0 {
		send(c.enc, selRelease)
	}
	if c.cb != 0 {
		send(c.cb, selRelease)
	}
	c.enc, c.cb = 0, 0
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
	withPool(c.release)
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
