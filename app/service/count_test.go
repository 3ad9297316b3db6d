package service

import (
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/app/store"
)

// The composer's running count: the text's tokens with the model's own
// tokenizer, the prompt as it will be sent (checked against the prompt the
// reply then reports), the documents waiting beside it, and what is left.
func TestCountTokens(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	// "Hello!" is ids 1368 0 in the demo's vocabulary (its greedy.json).
	c, err := svc.ui.CountTokens(SendRequest{Text: "Hello!"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Ready || c.Tokens != 2 || c.ContextTokens <= 0 || c.PromptTokens <= c.Tokens || c.DocumentTokens != 0 || c.LeftTokens != c.ContextTokens-c.PromptTokens {
		t.Fatalf("count of Hello!: %+v", c)
	}
	res, err := svc.ui.Send(SendRequest{Text: "Hello!"})
	if err != nil {
		t.Fatal(err)
	}
	reply := waitReply(t, svc.Service, res.Reply.ID)
	if reply.Status != store.StatusComplete || reply.Stats == nil || reply.Stats.PromptTokens != c.PromptTokens {
		t.Fatalf("reply %+v: its prompt is not the %d tokens counted", reply.Stats, c.PromptTokens)
	}

	// In the conversation, with a document read beside it.
	v := attachData(t, svc, "stock.csv", []byte(stockCSV))
	next, err := svc.ui.CountTokens(SendRequest{ConversationID: res.Conversation.ID, Text: "Hello!", Attachments: []string{v.ID, "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	if next.PromptTokens <= c.PromptTokens || next.DocumentTokens != v.Attachment.Tokens ||
		next.LeftTokens != next.ContextTokens-next.PromptTokens-next.DocumentTokens {
		t.Fatalf("count in the conversation with a document: %+v (first turn %+v, document %d tokens)", next, c, v.Attachment.Tokens)
	}

	// Bounded: a text over MaxCountBytes is refused, saying what to do.
	if _, err := svc.ui.CountTokens(SendRequest{Text: strings.Repeat("a", MaxCountBytes+1)}); err == nil || !strings.Contains(err.Error(), "attach it as a document") {
		t.Errorf("a text over the bound: %v", err)
	}
}
