package bench

import (
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

func TestImageGrid(t *testing.T) {
	for _, c := range []struct {
		tokens int
		want   [3]int
	}{{1024, [3]int{1, 64, 64}}, {64, [3]int{1, 16, 16}}, {12, [3]int{1, 6, 8}}, {7, [3]int{1, 2, 14}}} {
		if got := ImageGrid(c.tokens, 2); got != c.want {
			t.Errorf("ImageGrid(%d, 2) = %v, want %v", c.tokens, got, c.want)
		}
	}
}

// TestRunVisionFollowUp runs the tower benchmark on the tiny vision
// model's shapes on the CPU backend: the encode gives one embedding row per
// image token, and the follow-up's first request encodes the image while
// the second, the same prompt with the answer and a new question, finds it
// in the prefix cache and encodes nothing.
func TestRunVisionFollowUp(t *testing.T) {
	m, err := checkpoint.Load(fixtures.Path(t, "qwen35moe-vl-tiny", "hf-bf16"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(fixtures.Demo(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(m.Weights, cpu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	tgt := Target{Kind: "cpu", Backend: b, Weights: m.Weights}
	var log strings.Builder
	r, err := RunVision(tgt, VisionSettings{Tokens: 16, Depth: 1, FollowUp: true, Seed: 3}, tok, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if r.Depth != 1 || r.Grid != [3]int{1, 8, 8} || r.EncodeSeconds.N != 1 {
		t.Fatalf("depth %d, grid %v, %d runs; want 1, [1 8 8], 1", r.Depth, r.Grid, r.EncodeSeconds.N)
	}
	if len(r.FollowUp) != 2 {
		t.Fatalf("%d follow-up requests, want 2", len(r.FollowUp))
	}
	first, second := r.FollowUp[0], r.FollowUp[1]
	if first.ImagesEncoded != 1 || first.CachedTokens != 0 {
		t.Errorf("first request: %d images encoded, %d cached; want 1, 0", first.ImagesEncoded, first.CachedTokens)
	}
	if second.ImagesEncoded != 0 || second.CachedTokens < first.PromptTokens-1 {
		t.Errorf("follow-up: %d images encoded, %d of %d tokens cached; want 0 and at least the first prompt less one (%d)",
			second.ImagesEncoded, second.CachedTokens, second.PromptTokens, first.PromptTokens-1)
	}
}
