package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// faultDevice is the emu device with faults that a Mac can produce and the
// emulator cannot, switched on for one step: a kernel that Apple's compiler
// refuses, device memory running out, a panic while recording.
type faultDevice struct {
	device.Device
	failPipeline  bool
	failBuffers   bool
	panicPipeline bool
}

func (d *faultDevice) Pipeline(name string) (device.Pipeline, error) {
	if d.panicPipeline {
		panic("a bug while recording " + name)
	}
	if d.failPipeline {
		return nil, fmt.Errorf("compiling %s: error: use of undeclared identifier", name)
	}
	return d.Device.Pipeline(name)
}

func (d *faultDevice) NewBuffer(n int) (device.Buffer, error) {
	if d.failBuffers {
		return nil, errors.New("newBufferWithLength failed (out of GPU memory?)")
	}
	return d.Device.NewBuffer(n)
}

// TestEncodingErrorThenStep makes one step fail while it is being recorded
// — each way recording can fail — and then runs the same step again on the
// same backend and sequence: it must succeed, as if the failed step had
// never been tried. Before a failed recording released its command buffer,
// the device stayed "recording" and every later step failed. The emu
// device enforces Metal's one-recording-at-a-time rule, so this test
// catches that here.
//
// The step after the failure must give the logits of a clean run exactly
// (tolerance 0): the same kernels on the same device from the same state
// are deterministic, and a failed step must leave no trace in that state.
func TestEncodingErrorThenStep(t *testing.T) {
	dir := fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit")
	m, err := checkpoint.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	w := m.Weights
	prompt := []int{3, 141, 59, 26, 5}
	in := model.Input{IDs: prompt, Logits: model.LogitsLast, Sample: &model.Sampling{}}

	attnLayer := -1
	for i, l := range w.Layers {
		if l.Attention != nil {
			attnLayer = i
			break
		}
	}
	if w.Layers[0].DeltaNet == nil || attnLayer < 0 {
		t.Fatal("the fixture needs a DeltaNet layer 0 and an attention layer")
	}

	clean := cleanRun(t, w, in)

	cases := []struct {
		name string
		// fail runs the failing step on b and seq and returns its error.
		fail func(t *testing.T, dev *faultDevice, b *Backend, seq model.Sequence) error
		want string
	}{
		{"kernel does not compile", func(t *testing.T, dev *faultDevice, b *Backend, seq model.Sequence) error {
			dev.failPipeline = true
			defer func() { dev.failPipeline = false }()
			_, err := model.Run(b, w, seq, in)
			return err
		}, "undeclared identifier"},
		{"scratch memory exhausted", func(t *testing.T, dev *faultDevice, b *Backend, seq model.Sequence) error {
			dev.failBuffers = true
			defer func() { dev.failBuffers = false }()
			_, err := model.Run(b, w, seq, in)
			return err
		}, "out of GPU memory"},
		{"block called with the wrong layer", func(t *testing.T, dev *faultDevice, b *Backend, seq model.Sequence) error {
			p, err := b.Begin([]model.Segment{{Seq: seq, In: in}})
			if err != nil {
				t.Fatal(err)
			}
			x := p.Embed(&w.Embed)
			h := p.RMSNorm(x, w.Layers[0].InputNorm)
			// Layer 0 is a DeltaNet layer: it has no KV cache.
			p.Attention(0, w.Layers[attnLayer].Attention, h)
			p.Submit()
			_, err = p.Wait()
			return err
		}, "layer 0: no KV cache"},
		{"panic while recording", func(t *testing.T, dev *faultDevice, b *Backend, seq model.Sequence) (err error) {
			dev.panicPipeline = true
			defer func() {
				dev.panicPipeline = false
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			_, err = model.Run(b, w, seq, in)
			return err
		}, "panic: a bug while recording"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dev := &faultDevice{Device: openTestDevice(t, 0)}
			b, err := New(dev, w, Options{})
			if err != nil {
				t.Fatal(err)
			}
			seq, err := b.NewSequence(len(prompt) + 2)
			if err != nil {
				t.Fatal(err)
			}
			defer seq.Close()
			if err := c.fail(t, dev, b, seq); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("failing step: error %v, want one saying %q", err, c.want)
			}
			if seq.Pos() != 0 {
				t.Fatalf("after the failed step the sequence holds %d tokens, want 0", seq.Pos())
			}
			res, err := model.Run(b, w, seq, in)
			if err != nil {
				t.Fatalf("the step after a failed one: %v", err)
			}
			sameAsClean(t, res, clean)
			// A decode step fed by the device's sampled token works too.
			if _, err := model.Run(b, w, seq, model.Input{Sample: &model.Sampling{}}); err != nil {
				t.Fatalf("decode after the failure: %v", err)
			}
		})
	}
}

// cleanRun is in's pass on a new sequence of a new emulated backend.
func cleanRun(t *testing.T, w *model.Weights, in model.Input) model.Result {
	t.Helper()
	b, err := New(openTestDevice(t, 0), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := b.NewSequence(len(in.IDs) + 2)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	res, err := model.Run(b, w, seq, in)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// sameAsClean demands the token and the logits bits of the clean run.
func sameAsClean(t *testing.T, res, clean model.Result) {
	t.Helper()
	if res.Token != clean.Token || len(res.Logits) != len(clean.Logits) {
		t.Fatalf("after the failure: token %d, %d logits; clean run: token %d, %d logits", res.Token, len(res.Logits), clean.Token, len(clean.Logits))
	}
	for i := range res.Logits {
		if res.Logits[i] != clean.Logits[i] {
			t.Fatalf("logit %d after the failure %v, clean run %v", i, res.Logits[i], clean.Logits[i])
		}
	}
}
