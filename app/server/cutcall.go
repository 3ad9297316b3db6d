package server

import (
	"strings"

	"github.com/suzuran-app/suzuran/engine/chat"
)

// callHolder holds back the events of a tool call the model is writing
// until the call ends, so that a call cut off (by max_tokens, a stop
// sequence, the context) never reaches a client as a call it would run:
// the parser would close its arguments at the end of the output, and the
// client could not tell. A cut call is given as text instead, what the
// model wrote of it, and the answer's finish_reason says why it ended.
// Constrained calls need none of this: they are closed validly.
type callHolder struct {
	held []chat.Event
}

// feed passes events through, holding those of an open call until its end.
func (h *callHolder) feed(events []chat.Event) []chat.Event {
	if len(h.held) == 0 && !hasKind(events, chat.ToolCallStart) {
		return events
	}
	var out []chat.Event
	for _, ev := range events {
		switch {
		case ev.Kind == chat.ToolCallStart:
			h.held = append(h.held, ev)
		case len(h.held) > 0:
			h.held = append(h.held, ev)
			if ev.Kind == chat.ToolCallEnd {
				out = append(out, h.held...)
				h.held = nil
			}
		default:
			out = append(out, ev)
		}
	}
	return out
}

// finish takes the parser's last events (Finish) and the whole output as
// received: a call still open when the output ended becomes text, from its
// opening tag on, in place of whatever the parser makes of its end (its
// closing of the call, a partial tag it held back).
func (h *callHolder) finish(last []chat.Event, output string) []chat.Event {
	if len(h.held) == 0 {
		return h.feed(last)
	}
	h.held = nil
	tail := output
	if i := strings.LastIndex(output, "<tool_call>"); i >= 0 {
		tail = output[i:]
	}
	return []chat.Event{{Kind: chat.ContentDelta, Text: tail}}
}

func hasKind(events []chat.Event, kind chat.EventKind) bool {
	for _, ev := range events {
		if ev.Kind == kind {
			return true
		}
	}
	return false
}
