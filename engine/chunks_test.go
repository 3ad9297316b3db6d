package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
	"github.com/suzuran-app/suzuran/engine/synth"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// TestChunksBoundedAtEveryLength walks a prompt of the whole context
// through the chunk plan on the demo model and on the 4-layer synthetic
// one (three DeltaNet layers and one attention layer at the real width),
// and on the real model's 40 layers: every chunk's planned work stays
// within the budget, no chunk is shorter than the budget makes it (8 more
// tokens would exceed it), and past the positions where attention's work
// per token dominates the chunks shrink (on the demo model, below 512
// tokens from 16,384 positions on).
func TestChunksBoundedAtEveryLength(t *testing.T) {
	demo, _, err := checkpoint.ReadConfig(demoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	full, err := checkpoint.ParseConfig(synth.FullSizeConfig(), "qwen3.6-35b-a3b.mlx-4bit.json")
	if err != nil {
		t.Fatal(err)
	}
	four := *full
	four.NumLayers = 4
	four.LayerTypes = []model.LayerType{model.LinearAttention, model.LinearAttention, model.LinearAttention, model.FullAttention}
	const chunk = 512
	for _, c := range []struct {
		name    string
		cfg     *model.Config
		context int
		shrunk  int // a position from which every chunk is shorter than chunk
	}{
		{"demo", demo, 262144, 16384},
		{"synthetic 4 layers", &four, 262144, 65536},
		{"real 40 layers", full, 262144, 65536},
	} {
		cost := prefillCost(c.cfg)
		budget := cost.budget(chunk)
		sizes := map[int]int{}
		chunks := 0
		for pos := 0; pos < c.context; {
			n := min(cost.chunkAt(pos, chunk), c.context-pos)
			chunks++
			if n < 1 || n > chunk {
				t.Fatalf("%s: chunk of %d tokens at %d", c.name, n, pos)
			}
			if w := cost.work(pos, n); w > budget {
				t.Fatalf("%s: the chunk of %d tokens at %d plans %.3g operations, over the budget of %.3g", c.name, n, pos, w, budget)
			}
			if n < chunk && n < c.context-pos && cost.work(pos, min(n+8, chunk)) <= budget {
				t.Fatalf("%s: the chunk at %d takes %d tokens though %d fit the budget", c.name, pos, n, min(n+8, chunk))
			}
			if pos >= c.shrunk && n >= chunk {
				t.Fatalf("%s: a whole chunk of %d tokens at %d; attention's work there should shrink it", c.name, n, pos)
			}
			for _, at := range []int{2048, 8192, 16384, 32768, 131072} {
				if pos <= at && at < pos+n {
					sizes[at] = n
				}
			}
			pos += n
		}
		t.Logf("%s: %.3g operations per token and %.3g per key; a chunk plans at most %.3g; %d chunks to %d tokens; chunk at 2K, 8K, 16K, 32K, 128K: %d, %d, %d, %d, %d",
			c.name, cost.perToken, cost.perKey, budget, chunks, c.context, sizes[2048], sizes[8192], sizes[16384], sizes[32768], sizes[131072])
	}
}

// passLog is a cpu backend that notes each pass it begins: whose sequence,
// at which position, how many rows.
type passLog struct {
	*cpu.Backend
	mu     sync.Mutex
	passes []loggedPass
	onPass func(p loggedPass, n int) // the n-th pass, 0-based; on the engine goroutine
}

type loggedPass struct {
	seqs []model.Sequence
	pos  []int
	rows []int
}

func (l *passLog) Begin(segs []model.Segment) (model.Pass, error) {
	var p loggedPass
	for _, s := range segs {
		rows := len(s.In.IDs)
		if rows == 0 {
			rows = 1
		}
		p.seqs, p.pos, p.rows = append(p.seqs, s.Seq), append(p.pos, s.Seq.Pos()), append(p.rows, rows)
	}
	l.mu.Lock()
	n := len(l.passes)
	l.passes = append(l.passes, p)
	on := l.onPass
	l.mu.Unlock()
	if on != nil {
		on(p, n)
	}
	return l.Backend.Begin(segs)
}

func (l *passLog) log() []loggedPass {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.passes)
}

// TestLongPromptChunksThroughTheEngine reads a 3,600-token prompt on the
// demo model while another request decodes: the engine takes the planned
// chunks (whole ones first, shrinking ones from about 2,300 positions on),
// each within the budget; the other request takes a decode step between
// every two chunks; and a cancel given as a chunk begins ends the request
// with no further chunk. Events only: the passes the backend was asked
// for, in order.
func TestLongPromptChunksThroughTheEngine(t *testing.T) {
	m, err := checkpoint.Load(demoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.Load(demoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(m.Weights, cpu.Options{Sampler: sample.New()})
	if err != nil {
		t.Fatal(err)
	}
	lb := &passLog{Backend: b}
	// An EOS id the short request's greedy answer does not reach, so that it
	// decodes its whole budget while the long prompt is read.
	e, err := New(Options{Backend: lb, Weights: m.Weights, Tokenizer: tok, EOS: []int{m.Weights.Config.VocabSize - 1},
		PrefillChunk: 512, CacheBytes: -1, ContextTokens: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })

	c := greedyCaseFor(t, "Hello!")
	long := make([]int, 3600)
	for i := range long {
		long[i] = c.PromptIDs[i%len(c.PromptIDs)]
	}
	short := mustSubmit(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 200})
	shortRes := make(chan result, 1)
	go func() { shortRes <- readAll(short) }()
	r := readAll(mustSubmit(t, e, Request{Prompt: long, MaxTokens: 1}))
	if r.err != nil {
		t.Fatal(r.err)
	}
	passes := lb.log()

	// Each request's sequence is the one of its first chunk: the short
	// prompt's whole (but its last token), the long one's 512 tokens.
	shortSeq, longSeq := firstChunks(passes, len(c.PromptIDs)-1, 512)
	if shortSeq == nil || longSeq == nil || shortSeq == longSeq {
		t.Fatal("no first chunk of the short prompt or of the long one")
	}
	cost := e.cost
	budget := cost.budget(512)
	var chunks []int // indexes of the long prompt's chunk passes
	pos := 0
	for i, p := range passes {
		for j, s := range p.seqs {
			if s != longSeq || p.rows[j] == 1 {
				continue
			}
			want := min(cost.chunkAt(pos, 512), len(long)-1-pos)
			if p.pos[j] != pos || p.rows[j] != want {
				t.Fatalf("chunk %d: %d rows at %d, want the plan's %d at %d", len(chunks), p.rows[j], p.pos[j], want, pos)
			}
			if w := cost.work(pos, p.rows[j]); w > budget {
				t.Fatalf("chunk %d: %d rows at %d plan %.3g operations, over the budget %.3g", len(chunks), p.rows[j], pos, w, budget)
			}
			pos += p.rows[j]
			chunks = append(chunks, i)
		}
	}
	if pos != len(long)-1 {
		t.Fatalf("the chunks read %d tokens, want %d", pos, len(long)-1)
	}
	var rows []int
	for _, i := range chunks {
		rows = append(rows, passes[i].rows[slices.Index(passes[i].seqs, longSeq)])
	}
	t.Logf("chunks of the %d-token prompt: %v", len(long), rows)
	if rows[len(rows)-2] >= 512 {
		t.Errorf("chunks %v: none shrank before the prompt's end", rows)
	}
	for k := 1; k < len(chunks); k++ {
		between := false
		for _, p := range passes[chunks[k-1]+1 : chunks[k]] {
			if slices.Contains(p.seqs, shortSeq) {
				between = true
			}
		}
		if !between {
			t.Errorf("no decode step of the other request between chunks %d and %d", k-1, k)
		}
	}
	if sr := <-shortRes; sr.err != nil || sr.stats.GeneratedTokens != 200 {
		t.Fatalf("the short request: %d tokens, %v; want its 200", sr.stats.GeneratedTokens, sr.err)
	}

	checkCancelAtThirdChunk(t, e, lb, c.PromptIDs, long)
}

// checkCancelAtThirdChunk cancels a request for the long prompt as its
// third chunk begins and checks that the chunk is its last.
func checkCancelAtThirdChunk(t *testing.T, e *Engine, lb *passLog, prompt, long []int) {
	t.Helper()
	// A cancel as the third chunk begins: that chunk is the last.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt = -1
	first := len(lb.log())
	seen := 0
	lb.mu.Lock()
	lb.onPass = func(p loggedPass, n int) {
		if p.rows[0] > 1 {
			seen++
			if seen == 3 {
				cancelledAt = n
				cancel()
			}
		}
	}
	lb.mu.Unlock()
	s, err := e.Submit(ctx, Request{Prompt: long, MaxTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := readAll(s); r.stats.FinishReason != FinishCancelled {
		t.Fatalf("cancelled at its third chunk: ended %q (%v), want cancelled", r.stats.FinishReason, r.err)
	}
	// The engine's next turns run nothing for the cancelled request: one
	// more short request shows they have passed.
	lb.mu.Lock()
	lb.onPass = nil
	lb.mu.Unlock()
	if got := readAll(mustSubmit(t, e, Request{Prompt: prompt, MaxTokens: 2})); got.err != nil {
		t.Fatal(got.err)
	}
	after := 0
	for _, p := range lb.log()[first:] {
		if p.rows[0] > 1 && p.pos[0] > 0 {
			after++
		}
	}
	if cancelledAt < 0 {
		t.Fatal("the cancelled request's third chunk never began")
	}
	// Chunks at a position past 0: the second and the third (the first
	// starts at 0, as does the short request's prompt).
	if after != 2 {
		t.Errorf("%d chunks past position 0 began for the request cancelled at its third, want 2", after)
	}
}

// firstChunks finds the sequences whose first pass (at position 0) read
// rowsA and rowsB rows.
func firstChunks(passes []loggedPass, rowsA, rowsB int) (a, b model.Sequence) {
	for _, p := range passes {
		for i, s := range p.seqs {
			if p.pos[i] == 0 && p.rows[i] == rowsA && a == nil {
				a = s
			}
			if p.pos[i] == 0 && p.rows[i] == rowsB && b == nil {
				b = s
			}
		}
	}
	return a, b
}
