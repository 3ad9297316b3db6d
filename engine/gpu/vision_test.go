package gpu

import (
	"slices"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// TestVisionTowerEmu runs the tower on the emulator and holds the
// embeddings to transformers': float operands within 1e-4 (the CPU exact
// path's bar), half operands within 5e-3 (the GPU's half-path bar). The
// emulator takes seconds per image, so the test takes two cases: the
// upscaled square image and a landscape one (two_images), and the tall one,
// each in one layout (the layouts bind the same tower: engine/checkpoint's
// TestVisionLazyAndBothLayouts). Measured over every image case of both
// layouts: float 6.7e-7 to 7.6e-7, half 1.1e-6 to 1.2e-6.
func TestVisionTowerEmu(t *testing.T) {
	for _, c := range fixtures.VisionCases(t) {
		if c.Name != "hf-bf16/two_images" && c.Name != "mlx-4bit/tall" {
			continue
		}
		for _, o := range []struct {
			ops Operands
			tol float64
		}{{FloatOperands, 1e-4}, {HalfOperands, 5e-3}} {
			t.Run(o.ops.String()+"/"+c.Name, func(t *testing.T) {
				m, err := checkpoint.Load(c.Dir)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				vw, err := m.Vision()
				if err != nil {
					t.Fatal(err)
				}
				b, err := New(openTestDevice(t, 1), m.Weights, Options{GEMMOperands: o.ops})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				var got []float32
				for i := range c.Images {
					e, err := b.EncodeImage(vw, &c.Images[i])
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, e...)
				}
				e := fixtures.RelError(got, c.Embeds)
				t.Logf("image embeddings: relative error %.2e", e)
				if !(e <= o.tol) {
					t.Fatalf("image embeddings: relative error %.3g > %g", e, o.tol)
				}
			})
		}
	}
}

// TestVisionCounters holds the tower's counters to its plan: one command
// buffer and one host wait per image, no readback inside, the planned
// traffic at least the minimum (every weight once, pixels in, embeddings
// out), and PlanImage, which records without running, declaring exactly
// what a run adds to Stats().Vision (the benchmark counts the full-size
// tower with it).
func TestVisionCounters(t *testing.T) {
	var c *fixtures.VisionCase
	for _, vc := range fixtures.VisionCases(t) {
		if vc.Name == "hf-bf16/tall" {
			c = vc
		}
	}
	if c == nil {
		t.Fatal("the fixtures have no hf-bf16/tall case")
	}
	m, err := checkpoint.Load(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	vw, err := m.Vision()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(openTestDevice(t, 1), m.Weights, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	im := &c.Images[0]
	plan, err := b.PlanImage(vw, im)
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Stats().Vision; s != (Counters{}) {
		t.Fatalf("PlanImage changed the backend's counters: %+v", s)
	}
	if _, err := b.EncodeImage(vw, im); err != nil {
		t.Fatal(err)
	}
	got := b.Stats().Vision
	if got != plan {
		t.Fatalf("a run counted %+v, the plan %+v", got, plan)
	}
	if got.Passes != 1 || got.CommandBuffers != 1 || got.HostWaits != 1 || got.MidStepReadbacks != 0 {
		t.Fatalf("per image: %d passes, %d command buffers, %d host waits, %d readbacks; want 1, 1, 1, 0",
			got.Passes, got.CommandBuffers, got.HostWaits, got.MidStepReadbacks)
	}
	if want := int64(vw.Config.Tokens(im.Grid)); got.Tokens != want {
		t.Fatalf("tokens %d, want %d", got.Tokens, want)
	}
	if got.MinimumBytes <= 0 || got.ReadBytes+got.WriteBytes < got.MinimumBytes {
		t.Fatalf("planned %d bytes, minimum %d: the plan moves less than the least any run must", got.ReadBytes+got.WriteBytes, got.MinimumBytes)
	}
	t.Logf("per image: %d dispatches, planned %d bytes, minimum %d (%.2f×)", got.Dispatches, got.ReadBytes+got.WriteBytes,
		got.MinimumBytes, float64(got.ReadBytes+got.WriteBytes)/float64(got.MinimumBytes))
}

// TestVisionBesideDecode: the tower encodes on another goroutine than
// the passes', as the engine runs it. The device records one command
// buffer at a time, so while a decode step is being recorded the tower
// waits for its turn (it would otherwise fail with the device's error),
// then runs, and gives its embeddings as alone, bit for bit; a decode step
// after it gives the token it gives without the tower.
func TestVisionBesideDecode(t *testing.T) {
	var c *fixtures.VisionCase
	for _, vc := range fixtures.VisionCases(t) {
		if vc.Name == "hf-bf16/tall" {
			c = vc
		}
	}
	if c == nil {
		t.Fatal("the fixtures have no hf-bf16/tall case")
	}
	m, err := checkpoint.Load(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	vw, err := m.Vision()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(openTestDevice(t, 1), m.Weights, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	im := &c.Images[0]
	want, err := b.EncodeImage(vw, im)
	if err != nil {
		t.Fatal(err)
	}
	greedy := &model.Sampling{}
	step := func() int {
		seq, err := b.NewSequence(8)
		if err != nil {
			t.Fatal(err)
		}
		defer seq.Close()
		r, err := model.Run(b, m.Weights, seq, model.Input{IDs: []int{7}, Sample: greedy})
		if err != nil {
			t.Fatal(err)
		}
		return r.Token
	}
	alone := step()

	waiting := make(chan struct{})
	var once sync.Once
	if td, ok := b.dev.(*turnDevice); ok {
		td.towerWaits = func() { once.Do(func() { close(waiting) }) }
	}
	seq, err := b.NewSequence(8)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	segs := []model.Segment{{Seq: seq, In: model.Input{IDs: []int{7}, Sample: greedy}}}
	p, err := b.Begin(segs) // a decode step's recording is open
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var got []float32
	var encErr error
	go func() {
		defer close(done)
		got, encErr = b.EncodeImage(vw, im)
	}()
	select {
	case <-waiting:
	case <-done:
		model.Abandon(p)
		t.Fatalf("the tower did not wait for the pass being recorded: %v", encErr)
	}
	model.Forward(p, m.Weights, segs)
	p.Submit()
	rs, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if encErr != nil {
		t.Fatalf("the tower after its turn: %v", encErr)
	}
	if !slices.Equal(got, want) {
		t.Fatal("the tower's embeddings beside a decode step differ from its own")
	}
	if rs[0].Token != alone || step() != alone {
		t.Fatalf("decode beside the tower sampled %d, alone %d", rs[0].Token, alone)
	}
}
