package docs

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// A document is placed in the user turn before the question, so the
// conversation's next question finds it in the prefix cache: the second
// question prefills only the first answer and the new question, not the
// document again. Run with the demo model on the CPU; SUZURAN_DOC_TOKENS
// sets the document's size (BENCHMARKS.md has the 20,000-token run).
func TestFollowUpQuestionReusesDocumentPrefill(t *testing.T) {
	target := 1000
	if s := os.Getenv("SUZURAN_DOC_TOKENS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("SUZURAN_DOC_TOKENS=%q: %v", s, err)
		}
		target = n
	}
	dir, err := models.Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Load(dir, engine.LoadOptions{Backend: "cpu", ContextTokens: target + 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tok := demoTok(t)

	var text strings.Builder
	for i := 0; ; i++ {
		fmt.Fprintf(&text, "Section %d. The json module's dumps function serializes an object to a JSON string; loads parses one back.\n", i)
		if i%20 == 19 && len(tok.Encode(text.String())) >= target {
			break
		}
	}
	doc := mustExtract(t, "notes.txt", []byte(text.String()))
	att, err := NewAttachment(context.Background(), doc, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	thinking := false
	ask := func(messages []chat.Message) (engine.Stats, string, time.Duration) {
		t.Helper()
		start := time.Now()
		stream, _, err := e.SubmitChat(context.Background(), engine.ChatRequest{
			Render:    chat.RenderRequest{Messages: messages, AddGenerationPrompt: true, EnableThinking: &thinking},
			MaxTokens: 8,
		})
		if err != nil {
			t.Fatal(err)
		}
		var answer strings.Builder
		for ev := range stream.Events {
			answer.WriteString(ev.Text)
		}
		stats, err := stream.Result()
		if err != nil {
			t.Fatal(err)
		}
		return stats, answer.String(), time.Since(start)
	}
	first := []chat.Message{{Role: "user", Content: UserMessage([]Attachment{att}, "What does json.dumps do?")}}
	s1, answer, d1 := ask(first)
	second := append(first, chat.Message{Role: "assistant", Content: answer}, chat.Message{Role: "user", Content: "And json.loads?"})
	s2, _, d2 := ask(second)
	t.Logf("document %d tokens; first question: %d prompt tokens, %d prefilled in %v; second: %d prompt tokens, %d cached, %d prefilled in %v",
		att.Tokens, s1.PromptTokens, s1.PrefilledTokens, d1.Round(time.Millisecond), s2.PromptTokens, s2.CachedTokens, s2.PrefilledTokens, d2.Round(time.Millisecond))
	if s1.PrefilledTokens < att.Tokens {
		t.Errorf("first question prefilled %d tokens, fewer than the document's %d", s1.PrefilledTokens, att.Tokens)
	}
	// What the second question must compute: the first answer (at most 8
	// tokens), the new question and the template's turn markers; 64 is
	// their sum with room, and far below the document.
	if s2.CachedTokens < att.Tokens || s2.PrefilledTokens > 64 {
		t.Errorf("second question: %d cached, %d prefilled; the document's %d tokens should come from the cache", s2.CachedTokens, s2.PrefilledTokens, att.Tokens)
	}
}
