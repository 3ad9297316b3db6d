package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/suzuran-app/suzuran/app/docs"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// documentContent is the content of a user message that carries documents
// (OpenAI "file" parts, Responses "input_file" items, Anthropic "document"
// blocks): its text and the documents' bytes as sent. readDocuments
// extracts them, once the model is at hand, with the extraction and limits
// of a file dropped on the window, and makes the content the text the model
// reads: the documents' block (docs.UserMessage) before the question.
type documentContent struct {
	text  string
	parts []documentPart
	// images are the message's images (readImages places them before the
	// text).
	images []imagePart
}

// documentPart is one document of a message, as decoded from its part.
type documentPart struct {
	param string // where it is in the request, for errors
	name  string
	data  []byte
}

// isDocumentPart reports whether a content part's type carries a document.
func isDocumentPart(typ string) bool {
	return typ == "file" || typ == "input_file" || typ == "document"
}

// decodeDocumentPart reads a document part of any of the three APIs into
// a name and bytes. A part that points somewhere (a URL, an uploaded
// file's id) is refused: this server fetches nothing and keeps no files.
func decodeDocumentPart(part any, param string) (documentPart, error) {
	var (
		name string
		data []byte
		err  error
	)
	switch stringField(part, "type") {
	case "file": // chat completions: {"type": "file", "file": {"filename", "file_data"}}
		file, ok := field(part, "file").(*chat.Object)
		if !ok {
			return documentPart{}, badRequest(param+".file", "%s: a file part needs a file object with filename and file_data", param)
		}
		param += ".file"
		name, data, err = docs.OpenAIFile(plainJSON(file).(map[string]any))
	case "input_file": // Responses: {"type": "input_file", "filename", "file_data"}
		if url := stringField(part, "file_url"); url != "" {
			return documentPart{}, badRequest(param+".file_url", "%s.file_url: this server fetches nothing; send the file's content as file_data (base64, or a data: URL)", param)
		}
		name, data, err = docs.OpenAIFile(plainJSON(part).(map[string]any))
	case "document": // Anthropic: {"type": "document", "source": {…}, "title"}
		name, data, err = docs.AnthropicDocument(plainJSON(part).(map[string]any))
		param += ".source"
	}
	if err != nil {
		return documentPart{}, badRequest(param, "%s: %v", param, err)
	}
	return documentPart{param: param, name: name, data: data}, nil
}

// plainJSON turns ordered JSON objects into maps, as app/docs reads them.
func plainJSON(v any) any {
	switch x := v.(type) {
	case *chat.Object:
		m := make(map[string]any, x.Len())
		for _, k := range x.Keys() {
			val, _ := x.Get(k)
			m[k] = plainJSON(val)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = plainJSON(item)
		}
		return out
	}
	return v
}

// userContent joins a user message's content as textOf does, and keeps its
// document parts: the result is a string, or a *documentContent when the
// content carries documents.
func userContent(content any, param string) (any, error) {
	parts, ok := content.([]any)
	if !ok {
		return textOf(content, param)
	}
	var texts []any
	var documents []documentPart
	var images []imagePart
	for i, part := range parts {
		if typ := stringField(part, "type"); isImagePart(typ) {
			im, err := decodeImagePart(part, fmt.Sprintf("%s[%d]", param, i))
			if err != nil {
				return nil, err
			}
			images = append(images, im)
			continue
		}
		if !isDocumentPart(stringField(part, "type")) {
			texts = append(texts, part)
			continue
		}
		d, err := decodeDocumentPart(part, fmt.Sprintf("%s[%d]", param, i))
		if err != nil {
			return nil, err
		}
		documents = append(documents, d)
	}
	text, err := textOf(texts, param)
	if err != nil || len(documents)+len(images) == 0 {
		return text, err
	}
	return &documentContent{text: text, parts: documents, images: images}, nil
}

// readDocuments extracts the documents of a turn's messages (and reads
// their images, readImages) and counts
// their tokens, under the window's limits (docs' default Limits: size,
// pages, time, text), and places each message's documents before its text
// as the window does. The log says each document's name, format, size and
// tokens. A document that cannot be read is a 400 naming its part, with
// the extractor's reason; a prompt the documents make too long for the
// context is refused by the prompt's own check, as any other, saying how
// many tokens the documents hold.
func (s *Server) readDocuments(ctx context.Context, e *engine.Engine, t *chatTurn) error {
	for i := range t.messages {
		dc, ok := t.messages[i].Content.(*documentContent)
		if !ok {
			continue
		}
		var attachments []docs.Attachment
		for _, p := range dc.parts {
			doc, err := docs.Extract(ctx, p.name, p.data, docs.Options{})
			if err != nil {
				return documentError(p, err)
			}
			att, err := docs.NewAttachment(ctx, doc, e.Tokenizer(), nil)
			if err != nil {
				return documentError(p, err)
			}
			s.log.Info().Str("document", att.Name).Str("format", string(att.Format)).Int64("bytes", att.Size).
				Int("pages", att.Pages).Int("tokens", att.Tokens).Msg("document read")
			attachments = append(attachments, att)
			t.documentTokens += att.Tokens
		}
		t.messages[i].Content = docs.UserMessage(attachments, dc.text)
		if len(dc.images) > 0 {
			content, err := s.readImages(e, t, dc.images, docs.UserMessage(attachments, dc.text))
			if err != nil {
				return err
			}
			t.messages[i].Content = content
		}
	}
	return nil
}

// documentError is the answer to a document that could not be read: the
// client's (400) unless the request was cancelled meanwhile.
func documentError(p documentPart, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "cancelled",
			Message: fmt.Sprintf("%s: reading the document %s was cancelled", p.param, p.name)}
	}
	return badRequest(p.param, "%s: the document could not be read: %v", p.param, err)
}
