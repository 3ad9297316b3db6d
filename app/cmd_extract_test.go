package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/app/docs"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// suzuran extract prints the document block the model reads; --json the
// attachment records with tokens counted by the model's tokenizer; a file
// that cannot be read is reported while the others are still printed.
func TestExtractCommand(t *testing.T) {
	model := filepath.Join("..", "assets", "models", "suzuran-tiny")
	pdf := filepath.Join("docs", "testdata", "table.pdf")
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(notes, []byte("# 鈴蘭\n\nShade-loving.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runWithStdin(t, "", "extract", "--model", model, pdf, notes)
	if err != nil {
		t.Fatal(err)
	}
	pdfText, err := os.ReadFile(filepath.Join("docs", "testdata", "table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := "<documents>\n<document name=\"table.pdf\" type=\"PDF document\" pages=\"2\">\n" + string(pdfText) +
		"\n</document>\n<document name=\"notes.md\" type=\"Markdown document\">\n# 鈴蘭\n\nShade-loving.\n\n</document>\n</documents>\n"
	if out != want {
		t.Errorf("stdout\n%s\nwant\n%s", out, want)
	}

	out, err = runWithStdin(t, "", "extract", "--json", "--model", model, pdf)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Attachments []docs.Attachment `json:"attachments"`
		BlockTokens int               `json:"block_tokens"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	tok, err := tokenizer.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(pdf)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if len(got.Attachments) != 1 {
		t.Fatalf("%d attachments", len(got.Attachments))
	}
	a := got.Attachments[0]
	if a.Name != "table.pdf" || a.Pages != 2 || a.Size != int64(len(data)) || a.SHA256 != hex.EncodeToString(sum[:]) ||
		a.Text != string(pdfText) || a.Tokens != len(tok.Encode(a.Text)) {
		t.Errorf("record %+v", a)
	}
	if want := len(tok.Encode(docs.DocumentBlock(got.Attachments) + "\n\n")); got.BlockTokens != want {
		t.Errorf("block tokens %d, want %d", got.BlockTokens, want)
	}

	image := filepath.Join(dir, "photo.png")
	if err := os.WriteFile(image, []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runWithStdin(t, "", "extract", "--model", model, image, notes)
	if err == nil || err.Error() != "1 of 2 files could not be read" {
		t.Errorf("error %v", err)
	}
	if !strings.Contains(out, `<document name="notes.md"`) || strings.Contains(out, "photo.png") {
		t.Errorf("stdout with a refused file:\n%s", out)
	}
}
