package service

import (
	"context"
	"strings"
	"testing"
)

// TestSendTooLongIsRefusedBeforeStoring sends a question longer than the
// model's context (40,000 words for 32,768 tokens), in a new conversation
// and in one that has a turn already, and one that leaves no room for the answer: both are refused with a message that
// says what to do, and nothing is added to the database.
func TestSendTooLongIsRefusedBeforeStoring(t *testing.T) {
	demo, err := demoDir()
	if err != nil {
		t.Fatal(err)
	}
	svc := newTestService(t, demo)
	ctx := context.Background()
	first, err := svc.ui.Send(SendRequest{Text: "What is os.path.join?"})
	if err != nil {
		t.Fatal(err)
	}
	waitReply(t, svc.Service, first.Reply.ID)
	// 40,000 words pass the context; 16,000 (32,011 tokens) fit it but leave no room for
	// the answer.
	for _, tc := range []struct {
		conv  int64
		words int
	}{{0, 40_000}, {first.Conversation.ID, 40_000}, {0, 16_000}} {
		conv := tc.conv
		_, err := svc.ui.Send(SendRequest{ConversationID: conv, Text: strings.Repeat("word ", tc.words)})
		if err == nil || !strings.Contains(err.Error(), "too long for the model's context") || !strings.Contains(err.Error(), "new conversation") {
			t.Fatalf("conversation %d: err %v, want a refusal saying the question is too long and what to do", conv, err)
		}
		t.Log(err)
	}
	convs, err := svc.store.Conversations(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	_, msgs, err := svc.store.Conversation(ctx, first.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 1 || len(msgs) != 2 {
		t.Errorf("%d conversations, %d messages in the first: a refused question was stored", len(convs), len(msgs))
	}
}
