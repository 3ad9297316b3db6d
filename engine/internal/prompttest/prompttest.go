// Package prompttest builds the prompts that the backends' tests share, in
// a model folder's own tokens.
//
// Only tests import this package.
package prompttest

import (
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// DocumentPrompt is a user turn holding a documents block (as app/docs
// renders one) of sentences sentences and a question, in the tokens of the
// model in dir, and a cut inside the document's text.
func DocumentPrompt(t testing.TB, dir string, sentences int) (ids []int, cut int) {
	t.Helper()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("The river rises in the hills and runs down to the sea. ", sentences)
	text := "<|im_start|>user\n<documents>\n<document name=\"river.txt\" type=\"Text\">\n" + body +
		"\n</document>\n</documents>\n\nWhere does the river run?<|im_end|>\n<|im_start|>assistant\n"
	ids = tok.EncodeWithSpecials(text)
	start := len(tok.EncodeWithSpecials(text[:strings.Index(text, body)]))
	end := len(tok.EncodeWithSpecials(text[:strings.Index(text, body)+len(body)]))
	cut = (start + end) / 2
	if cut <= start+1 || cut >= end-1 || len(ids) < end+4 {
		t.Fatalf("the document's tokens [%d, %d) of %d leave no cut inside it", start, end, len(ids))
	}
	return ids, cut
}
