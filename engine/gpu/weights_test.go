package gpu

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
	"github.com/suzuran-app/suzuran/engine/synth"
)

// regionOf is the index of the mapping that holds [start, end) once both
// are rounded to wrapping pages, or -1.
func regionOf(mappings [][]byte, start, end uintptr) int {
	for i, m := range mappings {
		s := sliceSpan(m)
		if start >= s.start&^(pageSize-1) && end <= (s.end+pageSize-1)&^(pageSize-1) {
			return i
		}
	}
	return -1
}

// TestWrapWeightsKeepsMappingsApart lays out two "files" next to each
// other in one anonymous mapping — the case of two shards mapped back to
// back — with a tensor at the end of the first and one at the start of the
// second, which touch once rounded to pages. They must land in two
// buffers, one inside each file; two tensors of one file that touch share
// a buffer; a span in no known mapping gets a copy of its own (Metal wraps
// only whole pages of one mapping).
func TestWrapWeightsKeepsMappingsApart(t *testing.T) {
	mem, err := unix.Mmap(-1, 0, 6*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	// The anonymous mapping is only page-aligned to the OS page; start the
	// two files on a wrapping page so that their bounds are exact.
	skip := int((pageSize - uintptr(unsafe.Pointer(&mem[0]))%pageSize) % pageSize)
	first := mem[skip : skip+2*pageSize]
	second := mem[skip+2*pageSize : skip+4*pageSize]
	heap := make([]byte, 1000)
	spans := []span{
		sliceSpan(first[100:200]),                   // page 0 of the first file
		sliceSpan(first[pageSize+8 : 2*pageSize-8]), // its page 1: touches the span above
		sliceSpan(second[8:300]),                    // page 0 of the second file: touches the first file's last page
		sliceSpan(second[pageSize : pageSize+64]),
		sliceSpan(heap[10:20]),
	}
	dev := openTestDevice(t, 0)
	wm, err := wrapWeights(dev, spans, [][]byte{second, first})
	if err != nil {
		t.Fatal(err)
	}
	mappings := [][]byte{first, second}
	perMapping := map[int]int{}
	for _, r := range wm.regions {
		perMapping[regionOf(mappings, r.start, r.end)]++
	}
	if perMapping[0] != 1 || perMapping[1] != 1 || perMapping[-1] != 1 || len(wm.regions) != 3 {
		t.Errorf("buffers per file %v (-1: outside both), %d buffers: want one per file and one for the heap span", perMapping, len(wm.regions))
	}
	if c, ok := dev.(interface{ WrapCopies() bool }); ok && c.WrapCopies() {
		t.Skipf("%s copies wrapped memory (it cannot alias host pages at its own memory's speed), so where a span lies in its buffer is not an address to compare", dev.Name())
	}
	for i := range heap {
		heap[i] = byte(i)
	}
	for i, s := range spans {
		l, err := wm.findSpan(s)
		if err != nil {
			t.Fatal(err)
		}
		got := l.buf.Bytes()[l.off:]
		if i == len(spans)-1 {
			// The heap span was copied when it was wrapped, before the
			// loop above wrote it.
			if &got[0] == (*byte)(s.p) || got[0] != 0 {
				t.Errorf("the heap span's buffer is not a copy made when it was wrapped")
			}
			continue
		}
		if &got[0] != (*byte)(s.p) {
			t.Errorf("span at %#x found at the wrong place of its buffer", s.start)
		}
	}
}

// TestShardedCheckpointBuffers loads a checkpoint of several shards (the
// tiny fixture's config written in shards of 256 KiB, as the real model's
// 4-bit checkpoint comes in several files) and checks that every device
// buffer over the weights lies inside one shard's mapping. It reports how
// many shards the system mapped back to back: those are the pairs that
// merging by address alone would have joined into one buffer, which Metal
// cannot wrap.
func TestShardedCheckpointBuffers(t *testing.T) {
	cfg, err := os.ReadFile(fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sharded")
	res, err := synth.Write(dir, synth.Options{Config: cfg, Seed: 5, ShardBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Shards < 3 {
		t.Fatalf("%d shards, want several", res.Shards)
	}
	b, w := openModel(t, dir, Options{})
	if len(w.Mappings) != res.Shards {
		t.Fatalf("%d mappings for %d shards", len(w.Mappings), res.Shards)
	}
	adjacent := 0
	for i, m := range w.Mappings {
		for j, n := range w.Mappings {
			if i != j && (sliceSpan(m).end+pageSize-1)&^(pageSize-1) >= sliceSpan(n).start&^(pageSize-1) && sliceSpan(m).start < sliceSpan(n).start {
				adjacent++
			}
		}
	}
	used := map[int]bool{}
	for _, r := range b.wm.regions {
		i := regionOf(w.Mappings, r.start, r.end)
		if i < 0 {
			t.Errorf("a %d-byte buffer at %#x lies in no single shard's mapping", r.end-r.start, r.start)
		}
		used[i] = true
	}
	if len(used) != res.Shards {
		t.Errorf("buffers cover %d of %d shards", len(used), res.Shards)
	}
	t.Logf("%d shards, %d buffers, %d pairs of shards mapped within a page of each other", res.Shards, len(b.wm.regions), adjacent)

	// The sharded model runs: a prompt and one device-fed step.
	seq, err := b.NewSequence(8)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	greedy := &model.Sampling{}
	if _, err := model.Run(b, w, seq, model.Input{IDs: []int{3, 14, 15}, Sample: greedy}); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Run(b, w, seq, model.Input{Sample: greedy}); err != nil {
		t.Fatal(err)
	}
}

// writePerExpertShards rewrites the stacked MLX checkpoint in src as
// per-expert tensors (experts.N.gate_proj.weight and so on, as
// transformers' save_pretrained may write them) in two shards, cut through
// layer 0's experts: experts below half the count in the first file, the
// rest in the second, so each of that layer's stacks lies in both.
func writePerExpertShards(t *testing.T, src, dst string) {
	t.Helper()
	set, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	type tensor struct {
		spec safetensors.TensorSpec
		data []byte
	}
	var first, second []tensor
	layer0 := "language_model.model.layers.0.mlp."
	for _, name := range set.Names() {
		ts, _ := set.Tensor(name)
		module, part, ok := strings.Cut(name, ".switch_mlp.")
		if !ok {
			first = append(first, tensor{safetensors.TensorSpec{Name: name, DType: ts.DType, Shape: ts.Shape}, ts.Data})
			continue
		}
		experts := ts.Shape[0]
		size := len(ts.Data) / experts
		for e := 0; e < experts; e++ {
			tn := tensor{safetensors.TensorSpec{Name: fmt.Sprintf("%s.experts.%d.%s", module, e, part), DType: ts.DType, Shape: ts.Shape[1:]},
				ts.Data[e*size : (e+1)*size]}
			if module+"." == layer0 && e >= experts/2 {
				second = append(second, tn)
			} else {
				first = append(first, tn)
			}
		}
	}
	if len(second) == 0 {
		t.Fatal("layer 0 has no switch_mlp experts to split")
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	weightMap := map[string]string{}
	for i, shard := range [][]tensor{first, second} {
		// Widest element types first, so that every tensor starts aligned
		// to its element size, as synth writes them.
		slices.SortStableFunc(shard, func(a, b tensor) int { return b.spec.DType.Size() - a.spec.DType.Size() })
		name := fmt.Sprintf("model-%05d-of-00002.safetensors", i+1)
		specs, data := make([]safetensors.TensorSpec, len(shard)), make([][]byte, len(shard))
		for j, tn := range shard {
			specs[j], data[j] = tn.spec, tn.data
			weightMap[tn.spec.Name] = name
		}
		if err := safetensors.WriteFile(filepath.Join(dst, name), specs, data, map[string]string{"format": "mlx"}); err != nil {
			t.Fatal(err)
		}
	}
	index, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dst, safetensors.IndexFileName), index, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExpertsStraddlingShards loads a checkpoint whose layer-0 expert
// stacks lie in two files (writePerExpertShards). No device buffer may be
// wrapped across the two mappings or off a page — Metal refuses both, and
// so does the emulator — so those stacks are gathered into buffers of the
// device's own; the model then computes what the stacked checkpoint
// computes, bit for bit (the same bytes through the same kernels).
func TestExpertsStraddlingShards(t *testing.T) {
	cfg, err := os.ReadFile(fixtures.Path(t, "qwen35moe-tiny", "mlx-4bit", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	stacked := filepath.Join(t.TempDir(), "stacked")
	if _, err := synth.Write(stacked, synth.Options{Config: cfg, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	split := filepath.Join(t.TempDir(), "per-expert")
	writePerExpertShards(t, stacked, split)

	b, w := openModel(t, split, Options{})
	if len(w.Mappings) != 2 {
		t.Fatalf("%d mappings, want the two shards", len(w.Mappings))
	}
	for _, r := range b.wm.regions {
		if regionOf(w.Mappings, r.start, r.end) < 0 {
			t.Errorf("a %d-byte buffer at %#x lies in no single shard's mapping", r.end-r.start, r.start)
		}
	}
	// Layer 0's gate, up and down stacks, codes, scales and biases each.
	l0 := &w.Layers[0].MoE
	var want int64
	for _, es := range []model.Experts{l0.Gate, l0.Up, l0.Down} {
		for e := range es {
			for _, part := range [][]byte{es[e].Data, es[e].Scales, es[e].Biases} {
				want += int64((len(part) + expertAlign - 1) &^ (expertAlign - 1))
			}
		}
	}
	if b.wm.gatheredBytes != want {
		t.Errorf("gathered %d bytes of experts, want %d: layer 0's three stacks and nothing else", b.wm.gatheredBytes, want)
	}

	ref, rw := openModel(t, stacked, Options{})
	run := func(b *Backend, w *model.Weights) [][]float32 {
		seq, err := b.NewSequence(16)
		if err != nil {
			t.Fatal(err)
		}
		defer seq.Close()
		greedy := &model.Sampling{}
		var out [][]float32
		in := model.Input{IDs: []int{3, 14, 15, 92, 65, 35}, Sample: greedy, Logits: model.LogitsLast}
		for step := 0; step < 4; step++ {
			res, err := model.Run(b, w, seq, in)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Logits)
			in = model.Input{Sample: greedy, Logits: model.LogitsLast}
		}
		return out
	}
	got, wantLogits := run(b, w), run(ref, rw)
	for step := range wantLogits {
		if !slices.Equal(got[step], wantLogits[step]) || len(got[step]) == 0 {
			t.Fatalf("pass %d: the per-expert shards' logits differ from the stacked checkpoint's", step)
		}
	}
}
