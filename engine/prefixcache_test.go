package engine

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/model"
)

// demoBackend loads the demo model's weights on the cpu backend.
func demoBackend(t testing.TB) (model.Backend, *model.Weights) {
	t.Helper()
	m, err := checkpoint.Load(demoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := cpu.New(m.Weights, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b, m.Weights
}

// prefillLogits feeds ids to seq in the given pieces and returns the last
// row's logits.
func prefillLogits(t testing.TB, b model.Backend, w *model.Weights, seq model.Sequence, pieces ...[]int) []float32 {
	t.Helper()
	var res model.Result
	for i, p := range pieces {
		in := model.Input{IDs: p}
		if i == len(pieces)-1 {
			in.Logits = model.LogitsLast
		}
		var err error
		if res, err = model.Run(b, w, seq, in); err != nil {
			t.Fatal(err)
		}
	}
	return res.Logits
}

// TestRestoreGivesTheLogitsOfAFullPrefill: a sequence restored from a cached
// snapshot and fed the rest of the prompt must produce the logits that a
// from-scratch prefill of the same pieces produces, bit for bit (the
// snapshot is a copy of the state, nothing is recomputed). Against the whole
// prompt in one pass the bound is 1e-5 of the largest logit: cutting the
// prompt into two passes changes the order of some f32 sums in the cpu
// backend (measured: 5e-6 of 18.4 here), which is rounding, not state.
func TestRestoreGivesTheLogitsOfAFullPrefill(t *testing.T) {
	b, w := demoBackend(t)
	prompt := slices.Concat(greedyCases(t)[1].PromptIDs, greedyCases(t)[1].GreedyIDs, greedyCases(t)[2].PromptIDs)
	cut := len(greedyCases(t)[1].PromptIDs) - 4 // the first prompt's assistant header

	cache := newPrefixCache(1 << 30)
	first, _ := b.NewSequence(256)
	prefillLogits(t, b, w, first, prompt[:cut])
	snap, err := first.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !cache.add(snap, prompt[:cut], 0) {
		t.Fatal("the cache refused a snapshot within its budget")
	}
	// Keep using the first sequence: the snapshot must not share its state.
	prefillLogits(t, b, w, first, prompt[cut:cut+3])

	restored, _ := b.NewSequence(256)
	hit := cache.lookup(prompt, len(prompt)-1)
	if hit == nil || len(hit.tokens) != cut {
		t.Fatalf("lookup found %v, want the %d-token snapshot", hit, cut)
	}
	if err := restored.Restore(hit.snap); err != nil {
		t.Fatal(err)
	}
	if restored.Pos() != cut {
		t.Fatalf("restored sequence at %d, want %d", restored.Pos(), cut)
	}
	got := prefillLogits(t, b, w, restored, prompt[cut:])

	scratch, _ := b.NewSequence(256)
	same := prefillLogits(t, b, w, scratch, prompt[:cut], prompt[cut:])
	if !slices.Equal(got, same) {
		t.Fatalf("restored logits differ from a fresh prefill in the same two pieces")
	}

	whole, _ := b.NewSequence(256)
	one := prefillLogits(t, b, w, whole, prompt)
	scale, diff := 0.0, 0.0
	for i := range one {
		scale = max(scale, math.Abs(float64(one[i])))
		diff = max(diff, math.Abs(float64(one[i]-got[i])))
	}
	if diff > 1e-5*scale {
		t.Fatalf("restored logits differ from a one-pass prefill by %g (largest logit %g)", diff, scale)
	}
	t.Logf("restore vs one pass: max difference %g of %g", diff, scale)
}

// TestCacheEvictsLeastRecentlyUsed fills a cache bounded to two snapshots
// with three, touching the oldest in between, and checks which survive.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	b, w := demoBackend(t)
	prompt := greedyCases(t)[3].PromptIDs
	seq, _ := b.NewSequence(64)
	var snaps []model.Snapshot
	for _, n := range []int{4, 5, 6} {
		if err := seq.Restore(mustSnapshotAt(t, b, w, prompt[:n])); err != nil {
			t.Fatal(err)
		}
		s, err := seq.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, s)
	}
	// Budget for the two largest: three cannot fit.
	cache := newPrefixCache(snaps[1].Bytes() + snaps[2].Bytes())
	cache.add(snaps[0], prompt[:4], 0)
	cache.add(snaps[1], prompt[:5], 0)
	// Use the 4-token one: now the 5-token one is the least recent.
	if hit := cache.lookup(prompt[:5], 4); hit == nil || len(hit.tokens) != 4 {
		t.Fatalf("lookup limited to 4 tokens found %v", hit)
	}
	cache.add(snaps[2], prompt[:6], 0) // evicts the 5-token one
	var held []int
	for _, e := range cache.entries {
		held = append(held, len(e.tokens))
	}
	slices.Sort(held)
	if !slices.Equal(held, []int{4, 6}) {
		t.Fatalf("cache holds snapshots of %v tokens, want [4 6]", held)
	}
	if cache.used > cache.budget {
		t.Fatalf("cache uses %d bytes, budget %d", cache.used, cache.budget)
	}
	// The longest matching prefix wins, within the limit.
	if hit := cache.lookup(prompt, len(prompt)-1); hit == nil || len(hit.tokens) != 6 {
		t.Fatalf("lookup of the whole prompt found %v, want the 6-token snapshot", hit)
	}
	// A prompt that differs inside the cached prefixes matches nothing.
	other := slices.Clone(prompt)
	other[2]++
	if hit := cache.lookup(other, len(other)-1); hit != nil {
		t.Fatalf("a different prompt matched a %d-token snapshot", len(hit.tokens))
	}
	// A snapshot larger than the whole budget is refused, not stored.
	tiny := newPrefixCache(snaps[0].Bytes() - 1)
	if tiny.add(snaps[0], prompt[:4], 0) || len(tiny.entries) != 0 {
		t.Fatal("a cache stored a snapshot larger than its budget")
	}

	// Protection: a request starts (clock recorded), restores the 4-token
	// snapshot and adds its checkpoint (6 tokens). Its end-of-prompt
	// snapshot (5 tokens) may evict only older entries: there are none, so
	// it is not stored, and the two the request relies on stay.
	cache = newPrefixCache(snaps[1].Bytes() + snaps[2].Bytes())
	cache.add(snaps[0], prompt[:4], 0)
	protect := cache.now()
	if hit := cache.lookup(prompt, len(prompt)-1); hit == nil || len(hit.tokens) != 4 {
		t.Fatalf("lookup found %v, want the 4-token snapshot", hit)
	}
	cache.add(snaps[2], prompt[:6], 0)
	if cache.add(snaps[1], prompt[:5], protect) {
		t.Fatal("a protected add evicted an entry the request used")
	}
	held = held[:0]
	for _, e := range cache.entries {
		held = append(held, len(e.tokens))
	}
	slices.Sort(held)
	if !slices.Equal(held, []int{4, 6}) {
		t.Fatalf("cache holds snapshots of %v tokens, want [4 6]", held)
	}
	// Unprotected, the same add evicts the least recent (the 4-token one).
	if !cache.add(snaps[1], prompt[:5], 0) || cache.has(prompt[:4]) {
		t.Fatal("an unprotected add did not evict the least recently used entry")
	}
}

// mustSnapshotAt prefills ids on a fresh sequence and returns its snapshot.
func mustSnapshotAt(t testing.TB, b model.Backend, w *model.Weights, ids []int) model.Snapshot {
	t.Helper()
	seq, _ := b.NewSequence(64)
	if _, err := model.Run(b, w, seq, model.Input{IDs: ids}); err != nil {
		t.Fatal(err)
	}
	s, err := seq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTightCacheKeepsTheTurnCheckpoint gives the engine a cache that holds
// the checkpoint snapshot of a turn and not much more, and asks for an
// end-of-answer snapshot too (as a request with tools does): that later,
// less useful snapshot must not evict the checkpoint, so the next user turn
// still prefills only its new tokens.
func TestTightCacheKeepsTheTurnCheckpoint(t *testing.T) {
	b, w := demoBackend(t)
	first := userTurn("What does json.dumps do?")
	e := loadDemo(t, "cpu", LoadOptions{CacheBytes: -1})
	p1, err := e.Encode(first)
	if err != nil {
		t.Fatal(err)
	}
	cp := p1.Checkpoints[0]
	checkpointBytes := mustSnapshotAt(t, b, w, p1.IDs[:cp]).Bytes()

	// Room for one and a half checkpoints: any second snapshot would have
	// to evict the checkpoint.
	e = loadDemo(t, "cpu", LoadOptions{CacheBytes: checkpointBytes * 3 / 2})
	_, answer, _ := collect(t, e, Request{Prompt: p1.IDs, Checkpoints: p1.Checkpoints, SnapshotAnswer: true, MaxTokens: 48})
	second := first
	second.Messages = append(slices.Clone(first.Messages),
		chat.Message{Role: "assistant", Content: answer},
		chat.Message{Role: "user", Content: "What is os.path.join?"})
	stream, _, err := e.SubmitChat(context.Background(), ChatRequest{Render: second, MaxTokens: 48})
	if err != nil {
		t.Fatal(err)
	}
	_, stats := drain(t, stream)
	if stats.CachedTokens != cp {
		t.Fatalf("with a tight cache the second turn restored %d tokens, want the checkpoint's %d", stats.CachedTokens, cp)
	}
}
