package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/assets/models"
)

// moduleRoot walks up from the test's folder to go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// greedyCase is one entry of ../shared/demo/greedy.json: what transformers
// produced from Suzuran Tiny's weights.
type greedyCase struct {
	Question   string `json:"question"`
	PromptIDs  []int  `json:"prompt_ids"`
	GreedyIDs  []int  `json:"greedy_ids"`
	GreedyText string `json:"greedy_text"`
}

func greedyCases(t testing.TB) []greedyCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "..", "shared", "demo", "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []greedyCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("greedy.json has no cases")
	}
	return f.Cases
}

// demoDir installs the demo model the way the app does, from the copy
// embedded in the binary, into a folder the test owns.
var demoOnce struct {
	sync.Once
	dir string
	err error
}

func demoDir(t testing.TB) string {
	t.Helper()
	demoOnce.Do(func() {
		root, err := os.MkdirTemp("", "suzuran-engine-test-")
		if err != nil {
			demoOnce.err = err
			return
		}
		demoOnce.dir, demoOnce.err = models.Install(root)
	})
	if demoOnce.err != nil {
		t.Fatal(demoOnce.err)
	}
	return demoOnce.dir
}

// backendsUnderTest are the backends this build can run; every end-to-end
// test runs on each.
func backendsUnderTest() []string {
	names := Backends()
	slices.Sort(names)
	return names
}

func loadDemo(t testing.TB, backend string, lo LoadOptions) *Engine {
	t.Helper()
	lo.Backend = backend
	e, err := Load(demoDir(t), lo)
	if err != nil {
		t.Fatalf("loading the demo model on %s: %v", backend, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// collect runs a request to the end and returns its ids, text and stats.
func collect(t testing.TB, e *Engine, req Request) ([]int, string, *Stats) {
	t.Helper()
	stream, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	var text strings.Builder
	var stats *Stats
	for ev := range stream.Events {
		if ev.Token >= 0 {
			ids = append(ids, ev.Token)
		}
		text.WriteString(ev.Text)
		if ev.Stats != nil {
			stats = ev.Stats
			if ev.Err != nil {
				t.Fatalf("generation failed: %v", ev.Err)
			}
		}
	}
	if stats == nil {
		t.Fatal("the stream ended without a final event")
	}
	if res, err := stream.Result(); res != *stats || err != nil {
		t.Fatalf("Result() = %+v, %v; the final event had %+v", res, err, *stats)
	}
	return ids, text.String(), stats
}

// TestGreedyMatchesTransformers decodes every greedy.json prompt and
// compares token for token and the streamed text byte for byte.
func TestGreedyMatchesTransformers(t *testing.T) {
	for _, backend := range backendsUnderTest() {
		t.Run(backend, func(t *testing.T) {
			e := loadDemo(t, backend, LoadOptions{})
			for _, c := range greedyCases(t) {
				ids, text, stats := collect(t, e, Request{Prompt: c.PromptIDs, MaxTokens: 48})
				if !slices.Equal(ids, c.GreedyIDs) {
					t.Errorf("%q: ids\n got %v\nwant %v", c.Question, ids, c.GreedyIDs)
				}
				if text != c.GreedyText {
					t.Errorf("%q: text\n got %q\nwant %q", c.Question, text, c.GreedyText)
				}
				wantFinish := FinishStop
				if len(c.GreedyIDs) == 48 && !e.eos[c.GreedyIDs[47]] {
					wantFinish = FinishLength
				}
				if stats.FinishReason != wantFinish || stats.GeneratedTokens != len(c.GreedyIDs) || stats.PromptTokens != len(c.PromptIDs) {
					t.Errorf("%q: stats %+v, want finish %s after %d tokens", c.Question, stats, wantFinish, len(c.GreedyIDs))
				}
			}
		})
	}
}
