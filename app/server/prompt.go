package server

import (
	"fmt"
	"strings"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// EncodePrompt renders a conversation with the engine's chat template and
// tokenizes it, refusing one that cannot fit the context (an error
// wrapping engine.ErrPromptTooLong) at the cheapest point: from the length
// of its messages' text before anything is rendered, else as soon as the
// count passes the context while it is tokenized. A prompt of tens of
// megabytes so costs about its own size in memory, not the tens of times
// its size of rendering and tokenizing it whole.
func EncodePrompt(e *engine.Engine, r chat.RenderRequest) (chat.Prompt, error) {
	t, err := e.Template()
	if err != nil {
		return chat.Prompt{}, err
	}
	tok, ctx := e.Tokenizer(), e.ContextTokens()
	if least := minPromptTokens(tok, r.Messages); least >= ctx {
		return chat.Prompt{}, &promptTooLong{tokens: least, context: ctx,
			msg: fmt.Sprintf("%v: the messages' text alone is at least %d tokens, the context holds %d including the answer", engine.ErrPromptTooLong, least, ctx)}
	}
	text, err := t.Render(r)
	if err != nil {
		return chat.Prompt{}, err
	}
	ids, ok := tok.EncodeWithSpecialsUpTo(text, ctx-1)
	if !ok {
		return chat.Prompt{}, &promptTooLong{tokens: ctx, context: ctx,
			msg: fmt.Sprintf("%v: more than %d tokens, the context holds %d including the answer", engine.ErrPromptTooLong, ctx-1, ctx)}
	}
	return chat.Prompt{Text: text, IDs: ids, Checkpoints: chat.PromptCheckpoints(tok, r, ids), Images: r.Images()}, nil
}

// minPromptTokens is a lower bound on the rendered prompt's tokens from the
// text of its user, system and tool messages, which a chat template writes
// out whole (trimmed at most; assistant turns may lose their reasoning).
func minPromptTokens(tok *tokenizer.Tokenizer, msgs []chat.Message) int {
	n := 0
	add := func(s string) {
		// One token less per text: the texts' bounds are rounded up.
		n += max(0, tok.MinTokens(strings.TrimSpace(s))-1)
	}
	for _, m := range msgs {
		if m.Role != "user" && m.Role != "system" && m.Role != "tool" {
			continue
		}
		switch c := m.Content.(type) {
		case string:
			add(c)
		case []any:
			for _, part := range c {
				if text, ok := field(part, "text").(string); ok {
					add(text)
				}
			}
		}
	}
	return n
}

// promptTooLong is a prompt refused on the way, before it was counted
// whole: tokens is what is known of its length, a lower bound at or past
// the context (counting stops there, so that a huge prompt costs no more
// than the context's worth of work).
type promptTooLong struct {
	tokens, context int
	msg             string
}

func (e *promptTooLong) Error() string { return e.msg }

func (e *promptTooLong) Unwrap() error { return engine.ErrPromptTooLong }
