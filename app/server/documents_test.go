package server

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/app/docs"
	"github.com/suzuran-app/suzuran/engine"
)

// documentFixture is a document of app/docs' test data, its bytes and the
// text the window would place in the prompt for it with question.
type documentFixture struct {
	name string
	data []byte
	// prompt is the user message the window sends for the document and
	// the question (docs.UserMessage).
	prompt string
}

func loadDocumentFixture(t *testing.T, name, question string) documentFixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := docs.Extract(context.Background(), name, data, docs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	att := docs.Attachment{Name: doc.Name, Type: doc.Type, Pages: doc.Pages, PageUnit: doc.PageUnit, Text: doc.Text}
	return documentFixture{name: name, data: data, prompt: docs.UserMessage([]docs.Attachment{att}, question)}
}

// TestDocumentsThroughAPI: a document sent in each API's own shape (as the
// official SDKs write them) is extracted as the window extracts a dropped
// file and placed before the question: the prompt counts exactly as many
// tokens as the same request with the window's text in its place, and the
// log says the document's tokens. URL sources and file ids are refused, as
// is a file the extractor cannot read, each naming its part.
func TestDocumentsThroughAPI(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{ContextTokens: 4096}), nil)
	const question = "How many tulips are in stock?"
	pdf := loadDocumentFixture(t, "table.pdf", question)
	if !strings.Contains(pdf.prompt, "Tulip") || !strings.Contains(pdf.prompt, `<document name="table.pdf"`) {
		t.Fatalf("the extracted PDF lacks its table: %q", pdf.prompt)
	}
	notes := "Stock is counted on the last Friday of each quarter.\nTulips: 45 pots.\n"
	textDoc := docs.UserMessage([]docs.Attachment{{Name: "notes.txt", Type: "Plain text", Text: strings.TrimSpace(notes)}}, question)
	b64 := base64.StdEncoding.EncodeToString

	number := func(res response, keys ...any) float64 {
		t.Helper()
		if res.status != 200 {
			t.Fatalf("status %d: %s", res.status, res.body)
		}
		n, ok := path(res.json(t), keys...).(float64)
		if !ok {
			t.Fatalf("no %v in %s", keys, res.body)
		}
		return n
	}
	// The window's text for notes.txt names its type as the extractor
	// does: read it from the extractor rather than guessing.
	if doc, err := docs.Extract(context.Background(), "notes.txt", []byte(notes), docs.Options{}); err != nil {
		t.Fatal(err)
	} else {
		textDoc = docs.UserMessage([]docs.Attachment{{Name: doc.Name, Type: doc.Type, Text: doc.Text}}, question)
	}

	t.Run("chat completions file part", func(t *testing.T) {
		ask := func(content any) float64 {
			return number(post(t, ts.url+"/v1/chat/completions", map[string]any{"max_tokens": 1, "temperature": 0,
				"messages": []map[string]any{{"role": "user", "content": content}}}), "usage", "prompt_tokens")
		}
		// The openai SDK's shape: ChatCompletionContentPart.File.
		got := ask([]any{
			map[string]any{"type": "file", "file": map[string]any{"filename": "table.pdf", "file_data": "data:application/pdf;base64," + b64(pdf.data)}},
			map[string]any{"type": "text", "text": question},
		})
		if want := ask(pdf.prompt); got != want {
			t.Errorf("prompt_tokens %v with the file part, %v with the window's text", got, want)
		}
		if plain := ask(question); got < plain+50 {
			t.Errorf("prompt_tokens %v with the document, %v without: the document's text is not in the prompt", got, plain)
		}
	})

	t.Run("responses input_file", func(t *testing.T) {
		ask := func(content any) float64 {
			return number(post(t, ts.url+"/v1/responses", map[string]any{"max_output_tokens": 16, "temperature": 0,
				"input": []map[string]any{{"role": "user", "content": content}}}), "usage", "input_tokens")
		}
		got := ask([]any{
			map[string]any{"type": "input_file", "filename": "notes.txt", "file_data": "data:text/plain;base64," + b64([]byte(notes))},
			map[string]any{"type": "input_text", "text": question},
		})
		if want := ask([]any{map[string]any{"type": "input_text", "text": textDoc}}); got != want {
			t.Errorf("input_tokens %v with the input_file, %v with the window's text", got, want)
		}
	})

	t.Run("anthropic document blocks", func(t *testing.T) {
		count := func(content any) float64 {
			return number(post(t, ts.url+"/v1/messages/count_tokens", map[string]any{
				"messages": []map[string]any{{"role": "user", "content": content}}}), "input_tokens")
		}
		pdfBlock := map[string]any{"type": "document", "source": map[string]any{"type": "base64", "media_type": "application/pdf", "data": b64(pdf.data)}, "title": "table.pdf"}
		textBlock := map[string]any{"type": "document", "source": map[string]any{"type": "text", "media_type": "text/plain", "data": notes}, "title": "notes.txt"}
		questionBlock := map[string]any{"type": "text", "text": question}
		if got, want := count([]any{pdfBlock, questionBlock}), count(pdf.prompt); got != want {
			t.Errorf("count_tokens %v with the base64 PDF, %v with the window's text", got, want)
		}
		if got, want := count([]any{textBlock, questionBlock}), count(textDoc); got != want {
			t.Errorf("count_tokens %v with the text source, %v with the window's text", got, want)
		}
		// The messages route answers it, counting the same prompt.
		res := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 4, "temperature": 0,
			"messages": []map[string]any{{"role": "user", "content": []any{pdfBlock, questionBlock}}}})
		in := number(res, "usage", "input_tokens") + number(res, "usage", "cache_read_input_tokens")
		if want := count(pdf.prompt); in != want {
			t.Errorf("messages read %v input tokens, count_tokens %v", in, want)
		}
	})

	// The log names each document read with its tokens.
	logs := ts.logs.String()
	for _, name := range []string{"table.pdf", "notes.txt"} {
		if !strings.Contains(logs, `"document":"`+name+`"`) || !strings.Contains(logs, `"message":"document read"`) {
			t.Errorf("the log does not show %s read:\n%s", name, logs)
		}
	}
	if !strings.Contains(logs, `"tokens":`) {
		t.Errorf("the log does not count the documents' tokens:\n%s", logs)
	}

	// Documents longer than the context: the context's error, naming them.
	long := strings.Repeat("Stock is counted on the last Friday of each quarter. ", 600)
	res := post(t, ts.url+"/v1/chat/completions", map[string]any{"max_tokens": 4, "messages": []map[string]any{{"role": "user", "content": []any{
		map[string]any{"type": "file", "file": map[string]any{"filename": "long.txt", "file_data": b64([]byte(long))}}}}}})
	if v := res.json(t); res.status != 400 || path(v, "error", "code") != "context_length_exceeded" || !strings.Contains(path(v, "error", "message").(string), "tokens of documents") {
		t.Errorf("documents over the context: %d %s", res.status, res.body)
	}

	refusals := []struct {
		name, url, param, says string
		body                   map[string]any
	}{
		{"anthropic url source", "/v1/messages", "messages.0.content.0.source", "not fetched", map[string]any{"max_tokens": 4,
			"messages": []map[string]any{{"role": "user", "content": []any{map[string]any{"type": "document", "source": map[string]any{"type": "url", "url": "https://example.com/a.pdf"}}}}}}},
		{"anthropic url source, count_tokens", "/v1/messages/count_tokens", "messages.0.content.0.source", "not fetched", map[string]any{
			"messages": []map[string]any{{"role": "user", "content": []any{map[string]any{"type": "document", "source": map[string]any{"type": "url", "url": "https://example.com/a.pdf"}}}}}}},
		{"responses file_url", "/v1/responses", "input[0].content[0].file_url", "fetches nothing", map[string]any{
			"input": []map[string]any{{"role": "user", "content": []any{map[string]any{"type": "input_file", "file_url": "https://example.com/a.pdf"}}}}}},
		{"chat file_id", "/v1/chat/completions", "messages[0].content[0].file", "keeps no uploaded files", map[string]any{
			"messages": []map[string]any{{"role": "user", "content": []any{map[string]any{"type": "file", "file": map[string]any{"file_id": "file-abc"}}}}}}},
		{"chat unreadable file", "/v1/chat/completions", "messages[0].content[1].file", "could not be read", map[string]any{
			"messages": []map[string]any{{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi"},
				map[string]any{"type": "file", "file": map[string]any{"filename": "photo.png", "file_data": b64([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))}}}}}}},
	}
	for _, c := range refusals {
		res := post(t, ts.url+c.url, c.body)
		if res.status != 400 {
			t.Errorf("%s: %d %s, want 400", c.name, res.status, res.body)
			continue
		}
		v := res.json(t)
		if param := path(v, "error", "param"); param != nil && param != c.param {
			t.Errorf("%s: param %v, want %s", c.name, param, c.param)
		}
		if msg, _ := path(v, "error", "message").(string); !strings.Contains(msg, c.says) || !strings.Contains(msg, c.param) {
			t.Errorf("%s: %q should name %s and say %q", c.name, msg, c.param, c.says)
		}
	}
}
