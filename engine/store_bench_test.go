package engine

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine/chat"
)

// TestDocumentAfterRestart asks about a document, closes the engine (the
// app quits), starts a new engine on the same store folder, and asks the
// conversation's next question: its time to first token is that of
// reading the stored snapshot and computing the first answer and the new
// question, not the document. SUZURAN_SNAPSHOT_DOC_TOKENS sets the
// document's length (default 1,500: a second or two here) for
// BENCHMARKS.md; the times are logged, the test checks the cached
// tokens and that the answer is the one computed without a store.
func TestDocumentAfterRestart(t *testing.T) {
	tokens := 1500
	if s := os.Getenv("SUZURAN_SNAPSHOT_DOC_TOKENS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 {
			t.Fatalf("SUZURAN_SNAPSHOT_DOC_TOKENS=%q: give a token count of at least 100", s)
		}
		tokens = n
	}
	dir := t.TempDir()
	store, _ := openStore(t, dir)
	lo := LoadOptions{Store: store}
	e := loadDemo(t, "cpu", lo)
	sentence := "The harbour opens at six, the ferry leaves at seven and returns at noon. "
	per := len(e.Tokenizer().Encode(sentence))
	doc := "<documents>\n<document name=\"harbour.txt\">\n" + strings.Repeat(sentence, tokens/per) + "\n</document>\n</documents>\n\n"
	off := false
	turn := func(msgs ...chat.Message) chat.RenderRequest {
		return chat.RenderRequest{Messages: msgs, AddGenerationPrompt: true, EnableThinking: &off}
	}
	ask := func(e *Engine, r chat.RenderRequest) (string, Stats) {
		s, _, err := e.SubmitChat(context.Background(), ChatRequest{Render: r, MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		return drain(t, s)
	}
	q1 := chat.Message{Role: "user", Content: doc + "When does the ferry leave?"}
	start := time.Now()
	a1, st1 := ask(e, turn(q1))
	wall1 := time.Since(start)
	start = time.Now()
	store.Wait()
	written := time.Since(start)
	e.Close()
	store.Close()

	store, _ = openStore(t, dir)
	lo.Store = store
	start = time.Now()
	e = loadDemo(t, "cpu", lo)
	load := time.Since(start)
	next := turn(q1, chat.Message{Role: "assistant", Content: a1}, chat.Message{Role: "user", Content: "And when does it return?"})
	got, st2 := ask(e, next)
	fresh := loadDemo(t, "cpu", LoadOptions{CacheBytes: -1})
	want, st3 := ask(fresh, next)
	if got != want {
		t.Fatalf("after a restart the answer is %q, computed %q", got, want)
	}
	if st2.CachedTokens < st1.PromptTokens-8 {
		t.Fatalf("after a restart %d of %d prompt tokens came from the store, want the first question's %d", st2.CachedTokens, st2.PromptTokens, st1.PromptTokens)
	}
	u := store.Usage()
	t.Logf("first question: %d prompt tokens, time to first token %v (answer %v)", st1.PromptTokens, st1.PrefillDuration.Round(time.Millisecond), wall1.Round(time.Millisecond))
	t.Logf("snapshots written %v after the answer; store: %d snapshots, %.1f MB", written.Round(time.Millisecond), u.Snapshots, float64(u.Bytes)/1e6)
	t.Logf("after a restart (engine load %v): %d prompt tokens, %d from the store, time to first token %v; computed without the store %v",
		load.Round(time.Millisecond), st2.PromptTokens, st2.CachedTokens, st2.PrefillDuration.Round(time.Millisecond), st3.PrefillDuration.Round(time.Millisecond))
}
