package docs_test

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/suzuran-app/suzuran/app/docs"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// What the service does with a document dropped on the window: extract it,
// count it, check it against the context, cut it if the user chose so, and
// place it before the question.
func Example() {
	ctx := context.Background()
	tok, err := tokenizer.Load(filepath.Join("..", "..", "assets", "models", "suzuran-tiny"))
	if err != nil {
		panic(err)
	}
	doc, err := docs.ExtractFile(ctx, filepath.Join("testdata", "table.pdf"), docs.Options{})
	if err != nil {
		fmt.Println(err) // a message for the user, naming the file
		return
	}
	att, err := docs.NewAttachment(ctx, doc, tok, nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %s, %d %s, %d bytes\n", att.Name, att.Type, att.Pages, att.PageUnit, att.Size)

	// The service renders the conversation with the new question but
	// without the documents, and counts it.
	budget := docs.Budget{ContextTokens: 250, ConversationTokens: 40, AnswerTokens: 50}
	fit := budget.Check(tok, []docs.Attachment{att})
	fmt.Println("fits:", fit.Fits)
	if !fit.Fits {
		// Shown before sending, with keep the beginning / keep the end /
		// cancel; here the user kept the beginning.
		cut, after, err := docs.FitDocuments(ctx, tok, []docs.Attachment{att}, budget, docs.KeepBeginning)
		if err != nil {
			panic(err)
		}
		fmt.Println("after the cut:", after.Fits, cut[0].Cut.Keep)
		att = cut[0]
	}
	message := docs.UserMessage([]docs.Attachment{att}, "How many irises are in stock?")
	fmt.Println(message[:len("<documents>\n<document name=\"table.pdf\" type=\"PDF document\" pages=\"2\">")])
	// Output:
	// table.pdf: PDF document, 2 pages, 12230 bytes
	// fits: false
	// after the cut: true beginning
	// <documents>
	// <document name="table.pdf" type="PDF document" pages="2">
}
