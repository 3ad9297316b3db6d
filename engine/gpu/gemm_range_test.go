package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// rangeDevice wraps a device to measure what the prefill GEMMs read: before
// each GEMM dispatch it runs what was recorded so far, then reads the
// GEMM's input activations from device memory. It changes when work runs,
// not what runs, so it is for measuring only.
type rangeDevice struct {
	device.Device
	t      testing.TB
	maxAbs map[string]float64 // per kernel family
}

type rangeCB struct {
	d     *rangeDevice
	inner device.CommandBuffer
	err   error
}

func (d *rangeDevice) NewCommandBuffer() (device.CommandBuffer, error) {
	cb, err := d.Device.NewCommandBuffer()
	return &rangeCB{d: d, inner: cb}, err
}

func (c *rangeCB) Barrier() { c.inner.Barrier() }
func (c *rangeCB) Commit()  { c.inner.Commit() }
func (c *rangeCB) Discard() { c.inner.Discard() }

// Wait returns the first error of the command buffers this one ran as.
func (c *rangeCB) Wait() error {
	err := c.inner.Wait()
	if c.err != nil {
		return c.err
	}
	return err
}

func (c *rangeCB) Dispatch(d device.Dispatch) {
	name := d.Pipeline.Name()
	if strings.HasPrefix(name, "gemm_") || strings.HasPrefix(name, "moe_gemm_") {
		// Run everything before this GEMM, so its inputs are in memory.
		c.inner.Commit()
		if err := c.inner.Wait(); err != nil && c.err == nil {
			c.err = err
		}
		next, err := c.d.Device.NewCommandBuffer()
		if err != nil {
			c.d.t.Fatal(err)
		}
		c.inner = next
		c.d.measure(name, d)
	}
	c.inner.Dispatch(d)
}

func argOf(d device.Dispatch, i int) device.Arg {
	for _, a := range d.Args {
		if a.Index == i {
			return a
		}
	}
	panic(fmt.Sprintf("%s: no argument %d", d.Pipeline.Name(), i))
}

// measure records max |x| over the rows the GEMM d multiplies.
func (d *rangeDevice) measure(name string, disp device.Dispatch) {
	u32 := func(b []byte, i int) int { return int(binary.LittleEndian.Uint32(b[4*i:])) }
	f32 := func(a device.Arg, i int) float64 {
		return math.Abs(float64(math.Float32frombits(binary.LittleEndian.Uint32(a.Buffer.Bytes()[a.Offset+4*i:]))))
	}
	p := argOf(disp, 0).Bytes
	m := 0.0
	switch {
	case strings.HasPrefix(name, "gemm_"):
		in, rows, stride := u32(p, 0), u32(p, 2), u32(p, 3)
		x := argOf(disp, 4)
		for r := 0; r < rows; r++ {
			for k := 0; k < in; k++ {
				m = max(m, f32(x, r*stride+k))
			}
		}
		name = "dense"
	default:
		hidden, inter, shared, experts, hStride, xStride := u32(p, 0), u32(p, 1), u32(p, 2), u32(p, 3), u32(p, 4), u32(p, 7)
		tiles := argOf(disp, 1)
		tb := tiles.Buffer.Bytes()[tiles.Offset:]
		x := argOf(disp, 2)
		up := strings.Contains(name, "gate_up")
		for i := 0; i < disp.Threadgroups.Y; i++ {
			e, row0, n := u32(tb, 4*i), u32(tb, 4*i+1), u32(tb, 4*i+2)
			if uint32(e) == 0xffffffff {
				continue
			}
			for r := row0; r < row0+n; r++ {
				if up {
					tok := argOf(disp, 18)
					t := u32(tok.Buffer.Bytes()[tok.Offset:], r)
					for k := 0; k < hidden; k++ {
						m = max(m, f32(x, t*xStride+k))
					}
					continue
				}
				width := inter
				if e >= experts {
					width = shared
				}
				for k := 0; k < width; k++ {
					m = max(m, f32(x, r*hStride+k))
				}
			}
		}
		name = "experts gate/up"
		if !up {
			name = "experts down"
		}
	}
	d.maxAbs[name] = max(d.maxAbs[name], m)
}

// TestGEMMInputRange measures the largest |x| the prefill GEMMs read on
// each fixture checkpoint and on the demo model, and checks that it stays
// inside half's range (65504): the half operands clamp there, so a larger
// input would be computed wrong.
func TestGEMMInputRange(t *testing.T) {
	type target struct {
		name, dir string
		prompt    []int
	}
	var targets []target
	for _, ref := range fixtures.Models(t) {
		targets = append(targets, target{ref.Name, ref.Dir, ref.Prompt})
	}
	demo := fixtures.Demo(t)
	demoPrompt := make([]int, 80)
	for i := range demoPrompt {
		demoPrompt[i] = 100 + 37*i%900
	}
	targets = append(targets, target{"suzuran-tiny", demo, demoPrompt})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			m, err := checkpoint.Load(tg.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			dev := &rangeDevice{Device: openTestDevice(t, 0), t: t, maxAbs: map[string]float64{}}
			b, err := New(dev, m.Weights, Options{})
			if err != nil {
				t.Fatal(err)
			}
			seq, err := b.NewSequence(len(tg.prompt))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := model.Prefill(b, m.Weights, seq, tg.prompt, prefillChunk, model.Input{Sample: &model.Sampling{}}); err != nil {
				t.Fatal(err)
			}
			if len(dev.maxAbs) == 0 {
				t.Fatal("no GEMM ran")
			}
			for k, v := range dev.maxAbs {
				t.Logf("%s: max |x| at the GEMM input %.4g", k, v)
				if !(v < 65504) {
					t.Errorf("%s: GEMM input reaches %g, past half's range", k, v)
				}
			}
		})
	}
}
