package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// TestRunReadsMergedEvents: a generation whose reader starts only after the
// engine has generated every token gets them in merged events (several
// tokens each, engine.Stream), and run hands out the same text and the same
// logprob entries, one per token, as for a reader that keeps up. A plain
// completion emits one step per event it reads, so the late reader emits
// fewer steps: at most three (the event the stream was offering when the
// first token came, the merged rest, the final event) for 10 tokens.
func TestRunReadsMergedEvents(t *testing.T) {
	l := loadModel(t, fixtureDir, engine.LoadOptions{})
	ts := startServer(t, l, nil)
	e, _, err := l.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := genParams{prompt: chat.Prompt{IDs: e.Tokenizer().Encode("The quick brown fox")}, maxTokens: 10,
		logprobs: true, topLogprobs: 2}
	run := func(delay time.Duration) (res genResult, entries []logprobEntry, steps int) {
		g, err := ts.submit(context.Background(), e, p)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay) // the reader comes late on purpose: that is the case under test
		res = g.run(func(events []chat.Event, since time.Time) error {
			steps++
			entries = append(entries, g.takeLogprobs()...)
			return nil
		})
		return res, append(entries, g.takeLogprobs()...), steps
	}
	prompt, promptEntries, promptSteps := run(0)
	// 10 tokens of the fixture model take milliseconds; a second is far
	// more than the engine needs to queue them all.
	late, lateEntries, lateSteps := run(time.Second)
	if prompt.err != nil || late.err != nil {
		t.Fatalf("errors: %v, %v", prompt.err, late.err)
	}
	if late.text != prompt.text || late.stats.GeneratedTokens != 10 || prompt.stats.GeneratedTokens != 10 {
		t.Fatalf("late reader %q (%d tokens), prompt reader %q (%d tokens)", late.text, late.stats.GeneratedTokens,
			prompt.text, prompt.stats.GeneratedTokens)
	}
	if len(promptEntries) != 10 || fmt.Sprint(lateEntries) != fmt.Sprint(promptEntries) {
		t.Fatalf("logprob entries: late reader %d %v, prompt reader %d %v", len(lateEntries), lateEntries,
			len(promptEntries), promptEntries)
	}
	t.Logf("10 tokens: %d steps emitted for the prompt reader, %d for the late one", promptSteps, lateSteps)
	if lateSteps > 3 {
		t.Errorf("the late reader emitted %d steps, want at most 3", lateSteps)
	}
}
