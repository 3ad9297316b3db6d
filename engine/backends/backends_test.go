package backends

import (
	"fmt"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// TestOpen opens each backend of this build that runs here on the tiny
// fixture model and checks what it reports, that it runs the model (the
// reference's first greedy token), and that Close closes the device it
// opened: a command buffer on it is refused afterwards.
func TestOpen(t *testing.T) {
	ref := fixtures.Model(t, fixtures.TinyMLX) // the tiny model, MLX layout
	m, err := checkpoint.Load(ref.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, c := range []struct {
		name, kind string
		async      bool
		parallel   int
		gpu        bool
	}{
		{"", "cpu", false, 2, false},
		{"cpu", "cpu", false, 2, false},
		{"emu", "emu", true, 4, true},
	} {
		t.Run(c.kind+"/"+c.name, func(t *testing.T) {
			b, err := Open(c.name, m.Weights, Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprint(b.Kind, b.Async, b.Parallel, b.Emulated, b.GPU != nil, b.Device != nil)
			if want := fmt.Sprint(c.kind, c.async, c.parallel, c.kind == "emu", c.gpu, c.gpu); got != want {
				t.Errorf("kind, async, parallel, emulated, gpu, device: %s, want %s", got, want)
			}
			seq, err := b.NewSequence(len(ref.Prompt))
			if err != nil {
				t.Fatal(err)
			}
			res, err := model.Run(b, m.Weights, seq, model.Input{IDs: ref.Prompt, Sample: &model.Sampling{}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Token != ref.GenIDs[0] {
				t.Errorf("first greedy token %d, reference %d", res.Token, ref.GenIDs[0])
			}
			if err := seq.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if b.Device != nil {
				if _, err := b.Device.NewCommandBuffer(); err == nil {
					t.Error("the device still takes work after Close")
				}
			}
		})
	}
}

func TestOpenUnknown(t *testing.T) {
	_, err := Open("vulkan", &model.Weights{}, Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown backend "vulkan": this build has cpu, emu`) {
		t.Fatalf("err = %v, want the names this build has", err)
	}
}
