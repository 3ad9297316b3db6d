package engine

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/backends"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/machine"
	"github.com/suzuran-app/suzuran/engine/model"
)

func TestCacheBudget(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		name                  string
		available, modelBytes int64
		want                  int64
	}{
		{"memory not known", 0, 20 * gib, unknownMemoryCacheBytes},
		{"a quarter of what the weights leave", 40 * gib, 20 * gib, 5 * gib},
		{"tiny model", 8 * gib, 1 << 20, (8*gib - 1<<20) / 4},
		{"weights fill the memory", 20 * gib, 21 * gib, minCacheBytes},
	} {
		if got := CacheBudget(c.available, c.modelBytes); got != c.want {
			t.Errorf("%s: CacheBudget(%d, %d) = %d, want %d", c.name, c.available, c.modelBytes, got, c.want)
		}
	}
}

// TestLoadSizesTheCacheFromMemory: Load with CacheBytes 0 gives the prefix
// cache CacheBudget of the memory this machine has available, which it can
// read here (Linux: MemAvailable).
func TestLoadSizesTheCacheFromMemory(t *testing.T) {
	before := machine.Available()
	if before <= 0 {
		t.Fatal("available memory unknown on this machine")
	}
	e, err := Load(demoDir(t), LoadOptions{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	after := machine.Available()
	m, err := checkpoint.Load(demoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Memory moves while the test runs (other processes): the budget must
	// lie between the budgets of the readings before and after, with 64 MiB
	// of slack for the moves between them.
	lo, hi := CacheBudget(min(before, after), m.Bytes), CacheBudget(max(before, after), m.Bytes)
	got := e.cache.budget
	t.Logf("available %d MB, model %d MB: prefix cache %d MB", before>>20, m.Bytes>>20, got>>20)
	if got < lo-64<<20 || got > hi+64<<20 {
		t.Fatalf("prefix cache budget %d, want within [%d, %d]", got, lo, hi)
	}
}

// TestSnapshotBytesAreTrue: what a snapshot says it holds is the DeltaNet
// state plus the KV of its tokens (SnapshotBytes), on the cpu backend
// (f32 cache) and on the GPU backend in the emulator (bf16 cache), beside
// the token ids they keep, at two positions, so that the cache's bound counts
// what the memory really holds.
func TestSnapshotBytesAreTrue(t *testing.T) {
	m, err := checkpoint.Load(demoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := greedyCaseFor(t, "Hello!").PromptIDs
	for _, c := range []struct {
		backend     string
		kvElemBytes int
		perToken    int64 // bookkeeping beyond the state, per token
		fixed       int64
	}{
		{"cpu", 4, 8, 0},
		// The host's copy of the ids (8 bytes each) and the device's
		// history of them (4 bytes each), and the 4 slots of sampled ids.
		{"emu", 2, 12, 16},
	} {
		t.Run(c.backend, func(t *testing.T) {
			b, err := backends.Open(c.backend, m.Weights, backends.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			seq, err := b.NewSequence(len(prompt))
			if err != nil {
				t.Fatal(err)
			}
			defer seq.Close()
			pos := 0
			for _, n := range []int{5, len(prompt) - 5} {
				if _, err := model.Run(b, m.Weights, seq, model.Input{IDs: prompt[pos : pos+n]}); err != nil {
					t.Fatal(err)
				}
				pos += n
				snap, err := seq.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				want := SnapshotBytes(&m.Weights.Config, pos, c.kvElemBytes) + c.perToken*int64(pos) + c.fixed
				if got := snap.Bytes(); got != want {
					t.Errorf("snapshot at %d tokens holds %d bytes, want %d", pos, got, want)
				}
			}
		})
	}
}
