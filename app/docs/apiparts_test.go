package docs

import (
	"encoding/base64"
	"errors"
	"testing"
)

// The API's document parts come out as the bytes and names that Extract
// reads, so that a PDF sent to /v1/chat/completions or /v1/messages gets
// exactly the text a dropped one gets.
func TestAPIParts(t *testing.T) {
	pdf := readTestdata(t, "table.pdf")
	b64 := base64.StdEncoding.EncodeToString(pdf)
	cases := []struct {
		api   string
		part  map[string]any
		name  string
		data  []byte
		wrong string // the error's text when the part is refused
	}{
		{"openai", map[string]any{"filename": "table.pdf", "file_data": "data:application/pdf;base64," + b64}, "table.pdf", pdf, ""},
		{"openai", map[string]any{"file_data": b64}, "document", pdf, ""},
		{"openai", map[string]any{"file_data": "data:text/csv;base64," + base64.RawStdEncoding.EncodeToString([]byte("a,b\n1,2\n"))}, "document.csv", []byte("a,b\n1,2\n"), ""},
		{"openai", map[string]any{"file_id": "file-abc"}, "", nil, `bad document part: file_id "file-abc": this server keeps no uploaded files; send the content as file_data`},
		{"openai", map[string]any{"file_data": "data:application/pdf,%25PDF"}, "", nil, "bad document part: file_data is a data: URL without ;base64, data"},
		{"openai", map[string]any{"file_data": "***"}, "", nil, "bad document part: file_data is not base64: illegal base64 data at input byte 0"},
		{"anthropic", map[string]any{"title": "Stock report", "source": map[string]any{"type": "base64", "media_type": "application/pdf", "data": b64}}, "Stock report.pdf", pdf, ""},
		{"anthropic", map[string]any{"source": map[string]any{"type": "text", "media_type": "text/plain", "data": "鈴蘭"}}, "document.txt", []byte("鈴蘭"), ""},
		{"anthropic", map[string]any{"source": map[string]any{"type": "content", "content": []any{map[string]any{"type": "text", "text": "one"}, map[string]any{"type": "text", "text": "two"}}}}, "document.txt", []byte("one\n\ntwo"), ""},
		{"anthropic", map[string]any{"source": map[string]any{"type": "url", "url": "https://example.com/a.pdf"}}, "", nil, "bad document part: document sources of type url are not fetched; send the content as base64 or text"},
		{"anthropic", map[string]any{}, "", nil, "bad document part: a document block needs a source object"},
	}
	for i, c := range cases {
		var name string
		var data []byte
		var err error
		if c.api == "openai" {
			name, data, err = OpenAIFile(c.part)
		} else {
			name, data, err = AnthropicDocument(c.part)
		}
		if c.wrong != "" {
			if !errors.Is(err, ErrBadPart) || err.Error() != c.wrong {
				t.Errorf("%d %s: error %v, want %s", i, c.api, err, c.wrong)
			}
			continue
		}
		if err != nil || name != c.name || string(data) != string(c.data) {
			t.Errorf("%d %s: got %q, %d bytes, %v; want %q, %d bytes", i, c.api, name, len(data), err, c.name, len(c.data))
		}
	}
	// Through Extract, the part gives the text a dropped file gives.
	name, data, err := OpenAIFile(map[string]any{"file_data": b64})
	if err != nil {
		t.Fatal(err)
	}
	doc := mustExtract(t, name, data)
	if want := string(readTestdata(t, "table.txt")); doc.Text != want {
		t.Errorf("extracted part:\n%s\nwant\n%s", doc.Text, want)
	}
}
