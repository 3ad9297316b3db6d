package chat

import (
	"slices"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/fixtures"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// TestSharedCheckpoints: the end of the system turn and of the documents
// block are where two conversations that start the same way part: the
// prefix there is the same tokens in a prompt with another question, and
// a prompt without a system turn or documents has none.
func TestSharedCheckpoints(t *testing.T) {
	tok, err := tokenizer.Load(fixtures.Path(t, "qwen35moe-tiny", "hf-bf16"))
	if err != nil {
		t.Fatal(err)
	}
	system := "<|im_start|>system\nYou answer from the documents.<|im_end|>\n"
	docs := "<|im_start|>user\n<documents>\n<document name=\"a.txt\">\nThe ferry leaves at seven.\n</document>\n</documents>\n\n"
	one := tok.EncodeWithSpecials(system + docs + "When does it leave?<|im_end|>\n<|im_start|>assistant\n")
	two := tok.EncodeWithSpecials(system + docs + "Where does it go?<|im_end|>\n<|im_start|>assistant\n")
	cps := SharedCheckpoints(tok, one)
	if len(cps) != 2 {
		t.Fatalf("checkpoints %v, want the system turn's end and the documents' end", cps)
	}
	if sys := len(tok.EncodeWithSpecials(system)); cps[0] != sys {
		t.Errorf("system turn ends at %d, want %d", cps[0], sys)
	}
	// The documents' end: everything up to "</documents>" and no more than
	// the token holding its ">".
	withDocs := tok.EncodeWithSpecials(system + docs[:len(docs)-2])
	if cps[1] > len(withDocs) || cps[1] < len(withDocs)-1 {
		t.Errorf("documents end at %d, the block's tokens end at %d", cps[1], len(withDocs))
	}
	for _, cp := range cps {
		if !slices.Equal(one[:cp], two[:cp]) {
			t.Errorf("the prefix of %d tokens differs between two questions", cp)
		}
	}
	if got := SharedCheckpoints(tok, two); !slices.Equal(got, cps) {
		t.Errorf("another question gives checkpoints %v, want %v", got, cps)
	}
	if got := SharedCheckpoints(tok, tok.EncodeWithSpecials("<|im_start|>user\nHello<|im_end|>\n")); len(got) != 0 {
		t.Errorf("a prompt without system turn or documents has checkpoints %v", got)
	}
}
