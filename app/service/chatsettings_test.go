package service

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/app/store"
)

// greedyReply regenerates the conversation's answer and returns its text
// (thoughts and answer) once it holds more than 24 bytes (or has ended), stopped there,
// and the number of tokens its prompt had.
func greedyReply(t *testing.T, s *testService, conversation int64, think bool) (string, int) {
	t.Helper()
	m, err := s.ui.Regenerate(conversation, think)
	if err != nil {
		t.Fatal(err)
	}
	// A sampled reply may end (at an end-of-turn token) before 24 bytes.
	awaitEvent(t, s.Service, 30*time.Second, fmt.Sprintf("reply %d past 24 bytes or its end", m.ID), func(*Event) bool {
		r, err := s.store.Message(context.Background(), m.ID)
		return err == nil && (len(r.Content)+len(r.Reasoning) > 24 || r.Status != store.StatusStreaming)
	})
	s.ui.Stop(conversation)
	m = waitReply(t, s.Service, m.ID)
	if m.Stats == nil {
		t.Fatalf("reply %d has no stats: %+v", m.ID, m)
	}
	return m.Reasoning + "|" + m.Content, m.Stats.PromptTokens
}

// samePrefix says whether one of two stopped greedy texts continues the
// other: the same prompt and rule give the same tokens, stopped at
// different points.
func samePrefix(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(b, a)
}

// A conversation's own system prompt, thinking and sampling preset are
// what its turns use, over the app's: with the app's custom rule greedy
// (temperature 0) and the conversation on the custom preset, its answers
// repeat token for token; its own system prompt replaces the app's in the
// prompt (the reply's prompt tokens); its thinking "off" overrides the
// switch (the prompt and the greedy text of thinking off).
func TestConversationSettingsDriveItsTurns(t *testing.T) {
	s := newTestService(t, tinyDir)
	s.pace = 2 * time.Millisecond
	app := s.Settings()
	app.Custom = Sampling{Temperature: 0, TopP: 1}
	app.SystemPrompt = "You are a helpful assistant."
	if _, err := s.SaveSettings(app); err != nil {
		t.Fatal(err)
	}
	res, err := s.ui.Send(SendRequest{Text: "What does os.path.join do?"})
	if err != nil {
		t.Fatal(err)
	}
	s.ui.Stop(res.Conversation.ID)
	waitReply(t, s.Service, res.Reply.ID)
	id := res.Conversation.ID

	// The app's preset (auto) samples at random: two answers differ.
	a, _ := greedyReply(t, s, id, false)
	if b, _ := greedyReply(t, s, id, false); samePrefix(a, b) {
		t.Fatalf("the app's random sampling gave %q twice", a)
	}
	set := func(cs store.ChatSettings) {
		t.Helper()
		c, err := s.ui.SetConversationSettings(id, cs)
		if err != nil || c.Settings != cs {
			t.Fatalf("SetConversationSettings: %+v, %v", c.Settings, err)
		}
	}
	set(store.ChatSettings{SamplingPreset: PresetCustom})
	plain, plainTokens := greedyReply(t, s, id, false)
	if again, _ := greedyReply(t, s, id, false); !samePrefix(plain, again) {
		t.Fatalf("the conversation's greedy preset: %q then %q", plain, again)
	}
	_, thinkTokens := greedyReply(t, s, id, true)
	if thinkTokens == plainTokens {
		t.Fatalf("thinking on and off give prompts of %d tokens each", plainTokens)
	}
	long := strings.Repeat("Answer in French. ", 10) // 40-odd tokens more than the app's prompt
	set(store.ChatSettings{SamplingPreset: PresetCustom, SystemPrompt: long})
	if _, own := greedyReply(t, s, id, false); own < plainTokens+20 {
		t.Errorf("the conversation's system prompt: a prompt of %d tokens, the app's %d", own, plainTokens)
	}
	set(store.ChatSettings{SamplingPreset: PresetCustom, Thinking: store.ThinkingOff})
	if off, offTokens := greedyReply(t, s, id, true); offTokens != plainTokens || !samePrefix(plain, off) {
		t.Errorf("thinking off with the switch on: %q (%d prompt tokens), want the answer without thinking %q (%d)", off, offTokens, plain, plainTokens)
	}

	// The counts under the composer read the same prompt.
	set(store.ChatSettings{})
	before, err := s.ui.CountTokens(SendRequest{ConversationID: id, Text: "and?"})
	if err != nil {
		t.Fatal(err)
	}
	set(store.ChatSettings{SystemPrompt: strings.Repeat("Answer briefly. ", 20)})
	after, err := s.ui.CountTokens(SendRequest{ConversationID: id, Text: "and?"})
	if err != nil || after.PromptTokens <= before.PromptTokens+20 {
		t.Errorf("prompt tokens %d with the conversation's long system prompt, %d without (%v)", after.PromptTokens, before.PromptTokens, err)
	}

	for _, bad := range []store.ChatSettings{{SamplingPreset: "wild"}, {Thinking: "maybe"}, {SystemPrompt: strings.Repeat("x", maxSystemPrompt+1)}} {
		if _, err := s.ui.SetConversationSettings(id, bad); err == nil {
			t.Errorf("%.40v was taken", bad)
		}
	}
	if c, _, _ := s.store.Conversation(t.Context(), id); c.Settings.SystemPrompt == "" {
		t.Error("a refused change replaced the settings")
	}
}
