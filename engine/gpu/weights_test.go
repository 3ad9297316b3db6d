package gpu

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
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
// a buffer; a span in no known mapping gets its own.
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
	wm, err := wrapWeights(openTestDevice(t, 0), spans, [][]byte{second, first})
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
	for _, s := range spans {
		l, err := wm.findSpan(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.buf.Bytes()[l.off:]; &got[0] != (*byte)(s.p) {
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
