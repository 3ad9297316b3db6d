package gpu

import (
	"errors"
	"fmt"

	"github.com/suzuran-app/suzuran/engine/gpu/device"
)

// DefaultCommandBufferBytes is the planned work (the read and write bytes
// its dispatches declare) after which a pass that is not a decode step
// continues in another command buffer. macOS stops a command buffer that
// holds the GPU too long ("Impacting Interactivity", a GPU timeout), and a
// 512-token prefill chunk of the full model in one buffer plans about 132
// GB (TestPrefillPlannedBytes: 13.2 GB for the real width's first 4 of 40
// layers). The GEMMs declare a weight's bytes once per 32-row tile, so on
// the 4-bit layout a planned byte stands for about 64 multiply-adds: 4 GiB
// is about 0.55 TFLOP, a fifth of a second at the slowest Apple7 GPU's
// peak (M1, 2.6 TFLOPS), under half a second at half its peak, against a
// watchdog of seconds. A chunk then runs in about 31 buffers of a layer or
// so each; committing a buffer costs tens of microseconds.
const DefaultCommandBufferBytes = 4 << 30

// splitBuffer is the command buffer of a pass that may need several: it
// holds the recorded dispatches on the host until Commit, which replays
// them into as many device command buffers as the planned work needs,
// cutting at a barrier once a buffer holds limit bytes, and commits them
// one after another without waiting in between. Nothing reaches the device
// before Commit, so a discarded (abandoned, cancelled) pass leaves its
// sequences untouched, as a pass in one buffer does. The buffers run in
// commit order on the device's one queue (Metal tracks the buffers' writes
// from one command buffer to the next; the emulator runs them in turn), and
// no host read happens between them.
type splitBuffer struct {
	dev   device.Device
	limit int64

	ops     []splitOp
	planned int64 // bytes of the current part's dispatches
	cuts    []int // ops[cuts[i]] starts part i+1

	committed bool
	err       error // why nothing or not all was submitted
	parts     []device.CommandBuffer
}

// splitOp is one recorded dispatch, or a barrier when barrier is set.
type splitOp struct {
	d       device.Dispatch
	barrier bool
}

var _ device.CommandBuffer = (*splitBuffer)(nil)

func newSplitBuffer(dev device.Device, limit int64) *splitBuffer {
	if limit <= 0 {
		limit = DefaultCommandBufferBytes
	}
	return &splitBuffer{dev: dev, limit: limit}
}

// Dispatch keeps d for Commit. Constant data is copied now, as the devices
// do, so that the caller may reuse its slice.
func (s *splitBuffer) Dispatch(d device.Dispatch) {
	if s.committed {
		panic("gpu: Dispatch on a command buffer that was already committed or discarded")
	}
	args := make([]device.Arg, len(d.Args))
	copy(args, d.Args)
	for i := range args {
		if args[i].Bytes != nil {
			args[i].Bytes = append([]byte(nil), args[i].Bytes...)
		}
	}
	d.Args = args
	s.ops = append(s.ops, splitOp{d: d})
	s.planned += d.ReadBytes + d.WriteBytes
}

// Barrier orders the dispatches around it; it is also where a part may end.
func (s *splitBuffer) Barrier() {
	if s.committed {
		return
	}
	s.ops = append(s.ops, splitOp{barrier: true})
	if s.planned >= s.limit {
		s.cuts = append(s.cuts, len(s.ops))
		s.planned = 0
	}
}

// Parts is the number of command buffers Commit submits.
func (s *splitBuffer) Parts() int {
	n := len(s.cuts) + 1
	if len(s.cuts) > 0 && s.cuts[len(s.cuts)-1] == len(s.ops) {
		n-- // the last cut is at the end: no empty part after it
	}
	return n
}

// Commit records each part into a device command buffer and commits it,
// in order. When the device refuses a part, the parts before it have been
// submitted and run; Wait returns the refusal.
func (s *splitBuffer) Commit() {
	if s.committed {
		return
	}
	s.committed = true
	from := 0
	for i := 0; i < s.Parts(); i++ {
		to := len(s.ops)
		if i < len(s.cuts) {
			to = s.cuts[i]
		}
		cb, err := s.dev.NewCommandBuffer()
		if err != nil {
			s.err = fmt.Errorf("command buffer %d of %d of the pass: %w", i+1, s.Parts(), err)
			break
		}
		for _, op := range s.ops[from:to] {
			if op.barrier {
				cb.Barrier()
			} else {
				cb.Dispatch(op.d)
			}
		}
		cb.Commit()
		s.parts = append(s.parts, cb)
		from = to
	}
	s.ops = nil
}

// Discard drops the recording; nothing ran.
func (s *splitBuffer) Discard() {
	if s.committed {
		return
	}
	s.committed = true
	s.ops = nil
	s.err = errors.New("gpu: the command buffer was discarded, nothing ran")
}

// Wait waits for every submitted part and returns the first error.
func (s *splitBuffer) Wait() error {
	if !s.committed {
		return errors.New("gpu: Wait before Commit")
	}
	var first error
	for i, cb := range s.parts {
		if err := cb.Wait(); err != nil && first == nil {
			first = err
			if len(s.parts) > 1 {
				first = fmt.Errorf("command buffer %d of %d of the pass: %w", i+1, len(s.parts), err)
			}
		}
	}
	if first == nil {
		first = s.err
	}
	return first
}
