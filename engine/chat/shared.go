package chat

import (
	"bytes"

	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// documentsEnd closes the block of attached documents a user message
// opens with (app/docs: the documents, then the question).
const documentsEnd = "</documents>"

// SharedCheckpoints returns the positions in a rendered prompt's ids
// where another conversation may start the same way and then differ: the
// end of the system turn (the system prompt and the tools, which every
// run of an agent repeats) and the end of each block of attached
// documents (a new question about the same documents). A snapshot there
// serves the next conversation that starts with the same tokens; one whose
// tokens differ after all just does not match.
//
// The system turn ends after its "<|im_end|>" and the newline token after
// it (the template puts "<|im_start|>" next, so the newline is a token of
// its own). A documents block ends at the last token boundary at or
// before its "</documents>" ends: the token that holds the closing ">"
// may also hold what follows (the newlines before the question), which
// the next conversation may not repeat.
func SharedCheckpoints(tok *tokenizer.Tokenizer, ids []int) []int {
	start, ok1 := tok.TokenID("<|im_start|>")
	end, ok2 := tok.TokenID("<|im_end|>")
	if !ok1 || !ok2 || len(ids) < 3 || ids[0] != start {
		return nil
	}
	var out []int
	// The role's name may take several tokens ("sy", "stem").
	var role []byte
	for i := 1; i < len(ids) && len(role) < len("system\n"); i++ {
		role = append(role, tok.TokenBytes(ids[i])...)
	}
	if bytes.HasPrefix(role, []byte("system\n")) {
		for i := 2; i+1 < len(ids); i++ {
			if ids[i] == end {
				if string(tok.TokenBytes(ids[i+1])) == "\n" {
					out = append(out, i+2)
				}
				break
			}
		}
	}
	// The document blocks: scan the text token by token, keeping the last
	// len(documentsEnd)-1 bytes of the tokens before, so that a delimiter
	// split across tokens is found.
	var tail []byte
	for i, id := range ids {
		if tok.IsSpecial(id) {
			tail = tail[:0]
			continue
		}
		b := tok.TokenBytes(id)
		window := append(tail, b...)
		if at := bytes.Index(window, []byte(documentsEnd)); at >= 0 {
			// The delimiter ends inside or at the end of token i.
			if at+len(documentsEnd) == len(window) {
				out = append(out, i+1)
			} else if i > 0 {
				out = append(out, i)
			}
			window = window[at+len(documentsEnd):]
		}
		keep := min(len(window), len(documentsEnd)-1)
		tail = append(tail[:0], window[len(window)-keep:]...)
	}
	return out
}
