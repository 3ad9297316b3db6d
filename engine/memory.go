package engine

import (
	"github.com/suzuran-app/suzuran/engine/model"
)

// Sizing the prefix cache from the machine. The weights are mapped files:
// once read they sit in the page cache, which the system counts as
// available (reclaimable) memory, and before they are read they still need
// the room. So what the cache may take is a fraction of the available
// memory less the weights, whichever of the two states they are in.
const (
	// cacheShare is the fraction of the memory free after the model that
	// the prefix cache may hold: the rest stays for the running sequences'
	// own KV and DeltaNet state, the app, and what else the user runs.
	cacheShare = 0.25
	// minCacheBytes keeps the cache useful on a tight machine: a few
	// snapshots of a long conversation on the full model (about 63 MB of
	// DeltaNet state each, plus 20 KB of KV per token).
	minCacheBytes = 256 << 20
	// unknownMemoryCacheBytes is the budget when the machine cannot say
	// what it has free.
	unknownMemoryCacheBytes = 1 << 30
)

// CacheBudget is the prefix cache's default size in bytes for a model
// whose weight files take modelBytes, on a machine with available bytes of
// memory available now (machine.Available): cacheShare of what is left once
// the weights are resident, at least minCacheBytes; unknownMemoryCacheBytes
// when available is 0 (not known).
func CacheBudget(available, modelBytes int64) int64 {
	if available <= 0 {
		return unknownMemoryCacheBytes
	}
	free := available - modelBytes
	return max(int64(float64(free)*cacheShare), minCacheBytes)
}

// SnapshotBytes is the true size of a snapshot of a sequence at pos
// tokens: every DeltaNet layer's conv and recurrent state (f32, the same
// at any position) plus every attention layer's keys and values for pos
// tokens, kvElemBytes per element (4 for the cpu backend, 2 for the GPU's
// bf16 cache). A backend's Snapshot.Bytes adds only bookkeeping (the
// token ids) to this.
func SnapshotBytes(c *model.Config, pos, kvElemBytes int) int64 {
	channels := 2*c.LinearKeyHeads*c.LinearKeyHeadDim + c.LinearValueHeads*c.LinearValueHeadDim
	var n int64
	for _, lt := range c.LayerTypes {
		if lt == model.LinearAttention {
			n += 4 * int64((c.ConvKernel-1)*channels+c.LinearValueHeads*c.LinearKeyHeadDim*c.LinearValueHeadDim)
		} else {
			n += int64(2*c.NumKVHeads*c.HeadDim*kvElemBytes) * int64(pos)
		}
	}
	return n
}
