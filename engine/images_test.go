package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/model"
)

// visionCase is a case of the vision fixture (engine/internal/fixtures) by
// name, e.g. "hf-bf16/single".
func visionCase(t testing.TB, name string) *fixtures.VisionCase {
	t.Helper()
	for _, c := range fixtures.VisionCases(t) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no vision case %s", name)
	return nil
}

func loadVision(t testing.TB, c *fixtures.VisionCase, lo LoadOptions) *Engine {
	t.Helper()
	lo.Backend, lo.Precision = "cpu", "exact"
	e, err := Load(c.Dir, lo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// imageTolerance is the CPU exact path's bar on the vision fixture
// (engine/cpu's TestVisionFixtures), for judging greedy near-ties.
const imageTolerance = 1e-4

// TestImagesAnswerAndFollowUp: a request with an image gives transformers'
// greedy continuation; a follow-up that starts with the same prompt
// restores it from the prefix cache and runs the tower on nothing; the same
// image after other text takes its kept embeddings; the same tokens with
// another image of the same token count match only up to the image.
func TestImagesAnswerAndFollowUp(t *testing.T) {
	c := visionCase(t, "hf-bf16/single")
	e := loadVision(t, c, LoadOptions{})
	req := Request{Prompt: c.Prompt, Images: c.Images, MaxTokens: len(c.GenIDs)}
	ids, _, st := collect(t, e, req)
	if err := fixtures.CheckGreedy(ids, c.GenIDs, c.GenLogits, c.Vocab, imageTolerance); err != nil {
		t.Fatal(err)
	}
	if st.ImagesEncoded != 1 || st.CachedTokens != 0 {
		t.Fatalf("first request: %d images encoded, %d tokens cached; want 1, 0", st.ImagesEncoded, st.CachedTokens)
	}

	follow := slices.Concat(c.Prompt, ids[:4], []int{17, 29, 301})
	got, _, st := collect(t, e, Request{Prompt: follow, Images: c.Images, MaxTokens: 4})
	if st.ImagesEncoded != 0 || st.CachedTokens != len(c.Prompt)-1 {
		t.Fatalf("follow-up: %d images encoded, %d tokens cached; want 0, %d", st.ImagesEncoded, st.CachedTokens, len(c.Prompt)-1)
	}
	fresh := loadVision(t, c, LoadOptions{CacheBytes: -1})
	want, _, st := collect(t, fresh, Request{Prompt: follow, Images: c.Images, MaxTokens: 4})
	if st.ImagesEncoded != 1 || !slices.Equal(got, want) {
		t.Fatalf("follow-up from the cache gives %v, computed afresh %v (%d images encoded)", got, want, st.ImagesEncoded)
	}

	// The same image after other text: nothing of the prefix cache fits,
	// the embeddings kept by the image's hash do, and the answer is the
	// one computed afresh.
	other := slices.Concat([]int{5, 6, 7}, c.Prompt)
	got, _, st = collect(t, e, Request{Prompt: other, Images: c.Images, MaxTokens: 4})
	if st.ImagesEncoded != 0 || st.CachedTokens != 0 {
		t.Fatalf("the image after other text: %d images encoded, %d tokens cached; want 0, 0", st.ImagesEncoded, st.CachedTokens)
	}
	want, _, _ = collect(t, fresh, Request{Prompt: other, Images: c.Images, MaxTokens: 4})
	if !slices.Equal(got, want) {
		t.Fatalf("with kept embeddings: %v, computed afresh %v", got, want)
	}

	// Another image with the same number of tokens: neither cache may
	// take it for the first one.
	im1 := fixtures.LoadImage(t, c.Dir+"/../reference.safetensors", "image1")
	if model.Patches(im1.Grid) != model.Patches(c.Images[0].Grid) {
		t.Fatalf("image1 has %d patches, image0 %d: the test needs two of one size", model.Patches(im1.Grid), model.Patches(c.Images[0].Grid))
	}
	first := slices.Index(c.Prompt, e.Config().Vision.ImageTokenID)
	_, _, st = collect(t, e, Request{Prompt: c.Prompt, Images: []model.Image{im1}, MaxTokens: 1})
	if st.ImagesEncoded != 1 || st.CachedTokens > first {
		t.Fatalf("another image: %d images encoded, %d tokens cached; want 1 and at most the %d before the image", st.ImagesEncoded, st.CachedTokens, first)
	}
}

// TestImagesBatchedAndCancelled: two requests with images and one
// without decode together and each gets what it gets alone; a cancelled
// request with an image ends as cancelled and leaves the engine serving.
func TestImagesBatchedAndCancelled(t *testing.T) {
	single, two := visionCase(t, "hf-bf16/single"), visionCase(t, "hf-bf16/two_images")
	text := visionCase(t, "hf-bf16/text_only")
	reqs := []Request{
		{Prompt: single.Prompt, Images: single.Images, MaxTokens: 8},
		{Prompt: two.Prompt, Images: two.Images, MaxTokens: 8},
		{Prompt: text.Prompt, MaxTokens: 8},
	}
	alone := loadVision(t, single, LoadOptions{CacheBytes: -1, Parallel: 1})
	var want [][]int
	for _, r := range reqs {
		ids, _, _ := collect(t, alone, r)
		want = append(want, ids)
	}
	e := loadVision(t, single, LoadOptions{CacheBytes: -1, Parallel: 3, PrefillChunk: 16})
	streams := make([]*Stream, len(reqs))
	for i, r := range reqs {
		s, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = s
	}
	for i, s := range streams {
		var ids []int
		for ev := range s.Events {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			ids = append(ids, ev.IDs...)
		}
		if !slices.Equal(ids, want[i]) {
			t.Errorf("request %d in a batch: %v, alone %v", i, ids, want[i])
		}
	}

	// Cancelled in the middle of its prompt, after its images' rows.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := e.Submit(ctx, Request{Prompt: two.Prompt, Images: two.Images, Progress: func(p PrefillProgress) {
		if p.Done >= 100 {
			cancel()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for ev := range s.Events {
		got = append(got, ev.IDs...)
	}
	// (The progress callback runs on the stream's goroutine, so the
	// cancellation may land a few chunks later, or once decoding began.)
	if st, _ := s.Result(); st.FinishReason != FinishCancelled {
		t.Fatalf("request cancelled in its prompt finished %q after %d tokens", st.FinishReason, len(got))
	}
	ids, _, _ := collect(t, e, reqs[0])
	if !slices.Equal(ids, want[0]) {
		t.Fatalf("after a cancelled request: %v, want %v", ids, want[0])
	}
}

// TestImagesRefused: images to a model without a tower, or whose pad run
// does not match, are clear errors at Submit.
func TestImagesRefused(t *testing.T) {
	c := visionCase(t, "hf-bf16/single")
	demo := loadDemo(t, "cpu", LoadOptions{})
	if _, err := demo.Submit(context.Background(), Request{Prompt: []int{1, 2, 3}, Images: c.Images}); !errors.Is(err, ErrNoVision) {
		t.Fatalf("the demo model given an image: %v, want ErrNoVision", err)
	}
	e := loadVision(t, c, LoadOptions{})
	short := slices.Delete(slices.Clone(c.Prompt), 10, 11)
	_, err := e.Submit(context.Background(), Request{Prompt: short, Images: c.Images})
	if err == nil {
		t.Fatal("a pad run one token short was taken")
	}
	t.Log(err)
}

// TestImagePrefixAfterRestart: a prefix holding an image, written to the
// disk store and read back by a new engine, continues at the image's M-RoPE
// positions: the follow-up's log-probabilities equal, bit for bit, those of
// an engine that computes the prefix.
func TestImagePrefixAfterRestart(t *testing.T) {
	c := visionCase(t, "hf-bf16/single")
	dir := t.TempDir()
	n := len(c.Prompt)
	store, _ := openStore(t, dir)
	first := loadVision(t, c, LoadOptions{Store: store, StoreMinTokens: 8})
	collect(t, first, Request{Prompt: c.Prompt, Images: c.Images, Checkpoints: []int{n - 1}, MaxTokens: 1})
	store.Wait()

	logprobs := func(e *Engine, req Request) ([]float64, *Stats) {
		t.Helper()
		req.Logprobs, req.MaxTokens = true, 6
		stream, err := e.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var lp []float64
		var st *Stats
		for ev := range stream.Events {
			for _, l := range ev.Logprobs {
				lp = append(lp, l.Logprob)
			}
			if ev.Stats != nil {
				st = ev.Stats
			}
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
		}
		return lp, st
	}
	follow := slices.Concat(c.Prompt, []int{17, 29, 301})
	again, _ := openStore(t, dir)
	restarted := loadVision(t, c, LoadOptions{Store: again, StoreMinTokens: 8})
	got, st := logprobs(restarted, Request{Prompt: follow, Images: c.Images})
	if st.CachedTokens != n-1 || st.ImagesEncoded != 0 {
		t.Fatalf("after a restart: %d tokens cached, %d images encoded; want %d, 0", st.CachedTokens, st.ImagesEncoded, n-1)
	}
	fresh := loadVision(t, c, LoadOptions{CacheBytes: -1})
	// The same chunks (a pass ends at the checkpoint), so the same bits.
	want, _ := logprobs(fresh, Request{Prompt: follow, Images: c.Images, Checkpoints: []int{n - 1}})
	if !slices.Equal(got, want) {
		t.Fatalf("log-probabilities after the stored prefix %v, computed %v", got, want)
	}
}

// TestImageEncodeLeavesDecodeRunning: while one request's tower runs (its
// weights being read, then its image encoded, on a goroutine of its own),
// another request's decode steps go on. The tower's load is held at a
// gate until the other request, still decoding when the tower started,
// has finished its whole answer: were the tower run on the engine
// goroutine, the answer could not end and the test would fail at its bound
// (60 s, far above the 0.2 s its decode steps take alone on this
// loaded machine). Both answers equal those computed alone.
func TestImageEncodeLeavesDecodeRunning(t *testing.T) {
	single, text := visionCase(t, "hf-bf16/single"), visionCase(t, "hf-bf16/text_only")
	const textTokens = 200
	lo := LoadOptions{CacheBytes: -1, Parallel: 2}
	alone := loadVision(t, single, lo)
	wantText, _, _ := collect(t, alone, Request{Prompt: text.Prompt, MaxTokens: textTokens})
	wantImage, _, _ := collect(t, alone, Request{Prompt: single.Prompt, Images: single.Images, MaxTokens: 4})

	e := loadVision(t, single, lo)
	started, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open) // before the engine closes, which waits for the tower
	load := e.opts.Vision
	e.opts.Vision = func() (*model.VisionWeights, error) {
		close(started)
		<-gate
		return load()
	}
	a, err := e.Submit(context.Background(), Request{Prompt: text.Prompt, MaxTokens: textTokens})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	ev := <-a.Events
	got = append(got, ev.IDs...)
	b, err := e.Submit(context.Background(), Request{Prompt: single.Prompt, Images: single.Images, MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the image request's tower did not start in 60 s")
	}
	a.mu.Lock()
	ended := a.final != nil
	a.mu.Unlock()
	if ended {
		t.Fatalf("the text request ended before the tower started; the test needs a longer answer than %d tokens", len(wantText))
	}
	bound := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-a.Events:
			if !ok {
				done = true
				break
			}
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			got = append(got, ev.IDs...)
		case <-bound:
			t.Fatalf("the text request had %d of its %d tokens after 60 s while the tower waited", len(got), len(wantText))
		}
	}
	open()
	var image []int
	for ev := range b.Events {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		image = append(image, ev.IDs...)
	}
	if !slices.Equal(got, wantText) || !slices.Equal(image, wantImage) {
		t.Fatalf("beside an encode: text %v, image %v; alone %v, %v", got, image, wantText, wantImage)
	}
	if st, _ := b.Result(); st.ImagesEncoded != 1 {
		t.Fatalf("the image request encoded %d images, want 1", st.ImagesEncoded)
	}
	t.Logf("the text request's %d tokens came while the tower waited", len(got))
}
