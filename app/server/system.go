package server

import (
	"strings"

	"github.com/suzuran-app/suzuran/engine/chat"
)

// systemFirst merges every system message of a conversation into one at its
// start, in their order, separated by a blank line. The Anthropic and
// Responses APIs accept system (and developer) messages anywhere in the
// conversation, and Claude Code and Codex send them so; Qwen's chat
// template accepts one system message, at the start, and refuses any other
// ("System message must be at the beginning"). Merging keeps every
// instruction where the model was trained to read instructions; rendering a
// later one as a user turn instead would put words in the user's mouth.
func systemFirst(messages []chat.Message) []chat.Message {
	var parts []string
	n := 0
	for _, m := range messages {
		if m.Role == "system" {
			n++
			if text, _ := m.Content.(string); text != "" {
				parts = append(parts, text)
			}
		}
	}
	if n == 0 || (n == 1 && messages[0].Role == "system") {
		return messages
	}
	out := make([]chat.Message, 0, len(messages)-n+1)
	out = append(out, chat.Message{Role: "system", Content: strings.Join(parts, "\n\n")})
	for _, m := range messages {
		if m.Role != "system" {
			out = append(out, m)
		}
	}
	return out
}

// hasRole is whether a conversation holds a message of the role.
func hasRole(messages []chat.Message, role string) bool {
	for _, m := range messages {
		if m.Role == role {
			return true
		}
	}
	return false
}
