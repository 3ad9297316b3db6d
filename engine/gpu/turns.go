package gpu

import (
	"sync"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// turnDevice is the backend's device with the recording of command
// buffers taken in turns between the passes and the vision tower. A device
// records one command buffer at a time (Metal's rule, which the emulator
// enforces), and the engine encodes an image on a goroutine of its own
// while its goroutine records decode steps: a tower part (towerBuffer)
// waits until no pass is recording, and a pass's NewCommandBuffer waits
// while a tower part records, which takes only the replay of its recorded
// dispatches. Passes among themselves are not held: a second pass's
// recording beside the first is still the device's error.
type turnDevice struct {
	device.Device
	mu     sync.Mutex
	cond   sync.Cond
	passes int  // pass command buffers being recorded
	tower  bool // a tower part is being recorded
	// towerWaits, when set, is called (under mu) each time a tower part
	// starts waiting for its turn (tests).
	towerWaits func()
}

func newTurnDevice(dev device.Device) *turnDevice {
	d := &turnDevice{Device: dev}
	d.cond.L = &d.mu
	return d
}

// NewCommandBuffer implements device.Device for the passes.
func (d *turnDevice) NewCommandBuffer() (device.CommandBuffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.tower {
		d.cond.Wait()
	}
	cb, err := d.Device.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	d.passes++
	return &turnBuffer{CommandBuffer: cb, end: func() { d.passes-- }, d: d}, nil
}

// towerBuffer starts recording a part of the tower once no other
// recording is open.
func (d *turnDevice) towerBuffer() (device.CommandBuffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.tower || d.passes > 0 {
		if d.towerWaits != nil {
			d.towerWaits()
		}
		d.cond.Wait()
	}
	cb, err := d.Device.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	d.tower = true
	return &turnBuffer{CommandBuffer: cb, end: func() { d.tower = false }, d: d}, nil
}

// turnBuffer ends its turn at Commit or Discard.
type turnBuffer struct {
	device.CommandBuffer
	d     *turnDevice
	end   func()
	ended bool
}

func (c *turnBuffer) done() {
	c.d.mu.Lock()
	if !c.ended {
		c.ended = true
		c.end()
		c.d.cond.Broadcast()
	}
	c.d.mu.Unlock()
}

func (c *turnBuffer) Commit() {
	c.CommandBuffer.Commit()
	c.done()
}

func (c *turnBuffer) Discard() {
	c.CommandBuffer.Discard()
	c.done()
}
