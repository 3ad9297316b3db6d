package service

import (
	"fmt"
	"testing"
	"time"
)

// The model reads the branch the window shows: after going back to the
// first answer, the next question follows it, and the prompt holds it and
// not the answer regenerated since.
func TestNextTurnReadsTheShownBranch(t *testing.T) {
	s := newTestService(t, tinyDir)
	s.pace = 10 * time.Millisecond
	res, err := s.ui.Send(SendRequest{Text: "first question"})
	if err != nil {
		t.Fatal(err)
	}
	waitGrowth(t, s.Service, res.Reply.ID, 0)
	s.ui.Stop(res.Conversation.ID)
	first := waitReply(t, s.Service, res.Reply.ID)
	regen, err := s.ui.Regenerate(res.Conversation.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	waitGrowth(t, s.Service, regen.ID, 0)
	if _, err := s.ui.ShowVersion(first.ID); err == nil {
		t.Error("a version was shown while a reply was being written")
	}
	s.ui.Stop(res.Conversation.ID)
	second := waitReply(t, s.Service, regen.ID)
	if first.Content == second.Content {
		// The random-weight model with a random seed: two equal texts of
		// some tokens each do not happen by chance.
		t.Fatalf("both answers read %q", first.Content)
	}
	if _, err := s.ui.ShowVersion(first.ID); err != nil {
		t.Fatal(err)
	}
	next, err := s.ui.Send(SendRequest{ConversationID: res.Conversation.ID, Text: "follow-up"})
	if err != nil {
		t.Fatal(err)
	}
	s.ui.Stop(res.Conversation.ID)
	if next.Question.ParentID != first.ID {
		t.Fatalf("the follow-up follows message %d, want the shown answer %d", next.Question.ParentID, first.ID)
	}
	_, history, err := s.store.Conversation(t.Context(), res.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	msgs := promptMessages(s.Settings().SystemPrompt, history, next.Reply.ID)
	var answers []string
	for _, m := range msgs {
		if m.Role == "assistant" {
			answers = append(answers, fmt.Sprint(m.Content))
		}
	}
	if len(answers) != 1 || answers[0] != first.Content {
		t.Fatalf("the prompt's answers %q, want only the shown one %q", answers, first.Content)
	}
}
