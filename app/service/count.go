package service

import (
	"fmt"
	"strings"
)

// MaxCountBytes bounds the text CountTokens counts: the composer asks on
// every pause in typing, and a count of a text larger than any context is
// of no use to anyone.
const MaxCountBytes = 256 << 10

// TokenCount is the composer's line under the box while the user types:
// how many tokens the message takes, and how much of the context is left
// once the conversation, the message and the documents waiting beside it
// are in.
type TokenCount struct {
	// Ready says the model is loaded; when it is not, nothing was counted
	// (counting does not load a model).
	Ready bool `json:"ready"`
	// Tokens counts the text alone, with the loaded model's tokenizer.
	Tokens int `json:"tokens"`
	// PromptTokens counts the prompt the model would read: the system
	// prompt, the conversation so far and the text, as rendered to send.
	PromptTokens int `json:"promptTokens"`
	// DocumentTokens sums the documents attached and read so far.
	DocumentTokens int `json:"documentTokens"`
	ContextTokens  int `json:"contextTokens"`
	// LeftTokens is ContextTokens − PromptTokens − DocumentTokens: what the
	// answer and later turns have; negative when over.
	LeftTokens int `json:"leftTokens"`
}

// CountTokens counts the message being written (req.Text) in its
// conversation with the loaded model's tokenizer, for the composer's
// running count. It never loads the model: with none loaded it answers
// Ready false. A text over MaxCountBytes is refused with an error that
// says so.
func (u *UI) CountTokens(req SendRequest) (TokenCount, error) {
	if len(req.Text) > MaxCountBytes {
		return TokenCount{}, fmt.Errorf("the message is %d KB, too long to count as it is typed (the count stops at %d KB); attach it as a document instead",
			len(req.Text)>>10, MaxCountBytes>>10)
	}
	e := u.s.models.TryAcquire()
	if e == nil {
		return TokenCount{}, nil
	}
	defer u.s.models.Release()
	b, err := u.s.budget(e, req.ConversationID, strings.TrimSpace(req.Text), req.Think)
	if err != nil {
		return TokenCount{}, err
	}
	c := TokenCount{Ready: true, Tokens: len(e.Tokenizer().Encode(req.Text)), PromptTokens: b.ConversationTokens, ContextTokens: b.ContextTokens}
	u.s.attach.mu.Lock()
	for _, id := range req.Attachments {
		if p := u.s.attach.pending[id]; p != nil && p.view.State == AttachmentReady {
			c.DocumentTokens += p.doc.Tokens
		}
	}
	u.s.attach.mu.Unlock()
	c.LeftTokens = c.ContextTokens - c.PromptTokens - c.DocumentTokens
	return c, nil
}
