package docs

import (
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrBadPart is wrapped by the errors of OpenAIFile and AnthropicDocument:
// a request whose document part is malformed (the HTTP API answers 400).
var ErrBadPart = errors.New("bad document part")

// OpenAIFile reads the "file" object of an OpenAI chat content part,
//
//	{"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBERi0…"}}
//
// and returns the file's name and bytes for Extract. file_data may be a
// data URL or bare base64. A file_id (a file uploaded to OpenAI's storage)
// names nothing here and is refused.
func OpenAIFile(file map[string]any) (name string, data []byte, err error) {
	if id, _ := file["file_id"].(string); id != "" {
		return "", nil, fmt.Errorf("%w: file_id %q: this server keeps no uploaded files; send the content as file_data", ErrBadPart, id)
	}
	raw, _ := file["file_data"].(string)
	if raw == "" {
		return "", nil, fmt.Errorf("%w: a file part needs file_data (base64, or a data: URL)", ErrBadPart)
	}
	mediaType := ""
	if rest, ok := strings.CutPrefix(raw, "data:"); ok {
		header, payload, found := strings.Cut(rest, ",")
		if !found || !strings.HasSuffix(header, ";base64") {
			return "", nil, fmt.Errorf("%w: file_data is a data: URL without ;base64, data", ErrBadPart)
		}
		mediaType, raw = strings.TrimSuffix(header, ";base64"), payload
	}
	data, err = decodeBase64(raw)
	if err != nil {
		return "", nil, fmt.Errorf("%w: file_data is not base64: %v", ErrBadPart, err)
	}
	name, _ = file["filename"].(string)
	return partName(name, mediaType), data, nil
}

// AnthropicDocument reads an Anthropic "document" content block,
//
//	{"type": "document", "title": "report.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0…"}}
//
// and returns a name and bytes for Extract. Sources of type "base64" and
// "text" are read; "url" is refused, since nothing a request names is ever
// fetched, and so is "file" (an upload to Anthropic's storage). A "content"
// source (text blocks) is joined into text.
func AnthropicDocument(block map[string]any) (name string, data []byte, err error) {
	source, _ := block["source"].(map[string]any)
	if source == nil {
		return "", nil, fmt.Errorf("%w: a document block needs a source object", ErrBadPart)
	}
	mediaType, _ := source["media_type"].(string)
	kind, _ := source["type"].(string)
	switch kind {
	case "base64":
		s, _ := source["data"].(string)
		if data, err = decodeBase64(s); err != nil {
			return "", nil, fmt.Errorf("%w: source.data is not base64: %v", ErrBadPart, err)
		}
	case "text":
		s, _ := source["data"].(string)
		data = []byte(s)
		if mediaType == "" {
			mediaType = "text/plain"
		}
	case "content":
		var texts []string
		switch c := source["content"].(type) {
		case string:
			texts = append(texts, c)
		case []any:
			for _, item := range c {
				if m, ok := item.(map[string]any); ok && m["type"] == "text" {
					s, _ := m["text"].(string)
					texts = append(texts, s)
				}
			}
		}
		data, mediaType = []byte(strings.Join(texts, "\n\n")), "text/plain"
	case "url":
		return "", nil, fmt.Errorf("%w: document sources of type url are not fetched; send the content as base64 or text", ErrBadPart)
	case "file":
		return "", nil, fmt.Errorf("%w: this server keeps no uploaded files; send the content as base64 or text", ErrBadPart)
	default:
		return "", nil, fmt.Errorf("%w: unknown document source type %q (use base64, text or content)", ErrBadPart, kind)
	}
	name, _ = block["title"].(string)
	return partName(name, mediaType), data, nil
}

// partName is the name a document part is extracted under: its own when it
// has one with an extension, else "document" with the extension of its
// media type, so that formats told apart by name (CSV, code) still are.
func partName(name, mediaType string) string {
	name = filepath.Base(strings.TrimSpace(name))
	if name != "." && name != "/" && filepath.Ext(name) != "" {
		return name
	}
	if name == "." || name == "/" || name == "" {
		name = "document"
	}
	return name + mediaExtensions[strings.ToLower(strings.TrimSpace(mediaType))]
}

var mediaExtensions = map[string]string{
	"application/pdf":      ".pdf",
	"text/plain":           ".txt",
	"text/markdown":        ".md",
	"text/csv":             ".csv",
	"text/html":            ".html",
	"application/json":     ".json",
	"text/rtf":             ".rtf",
	"application/rtf":      ".rtf",
	"application/epub+zip": ".epub",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":       ".xlsx",
}

// decodeBase64 accepts standard base64 with or without padding, and
// ignores line breaks (some clients wrap it).
func decodeBase64(s string) ([]byte, error) {
	s = strings.NewReplacer("\n", "", "\r", "").Replace(strings.TrimSpace(s))
	if data, err := base64.StdEncoding.DecodeString(s); err == nil {
		return data, nil
	}
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
}
