package store

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"
)

// TestImagesKeptWithTheConversation stores a question with two images (one
// of them twice) and a document with every field of its record, closes the
// database, opens it again and reads all of it back; an edited question
// keeps the images, each image's bytes are stored once, and the bytes of
// an image no conversation sends any more go at the next start.
func TestImagesKeptWithTheConversation(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "suzuran.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG fake bytes one")
	jpg := []byte("\xff\xd8\xff fake bytes two")
	images := []Image{
		{Name: "chart.png", MIME: "image/png", Width: 640, Height: 480, Size: int64(len(png)), Tokens: 300, Data: png},
		{Name: "scan.pdf", MIME: "image/jpeg", Width: 1700, Height: 2200, Size: int64(len(jpg)), Tokens: 1200, Page: 2, Data: jpg},
		{Name: "chart again.png", MIME: "image/png", Width: 640, Height: 480, Size: int64(len(png)), Tokens: 300, Data: png},
	}
	att := Attachment{Name: "a.txt", Size: 10, SHA256: "ab", Format: "text", Type: "text/plain", Pages: 0, Tokens: 4,
		Text: "kept part", Kept: "beginning", OriginalTokens: 90, KeptTokens: 3, Encoding: "windows-1252",
		Notes: []string{"line 3 was not UTF-8", "a second note"}}
	c, q, _, err := s.AddTurn(ctx, Conversation{Title: "pictures"},
		Message{Role: "user", Content: "what is this?", Images: images, Attachments: []Attachment{att}},
		Message{Role: "assistant", Content: "a chart"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	_, msgs, err := s.Conversation(ctx, c.ID)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("reopened: %+v, %v", msgs, err)
	}
	want := make([]Image, len(images))
	for i, im := range images {
		im.SHA256, im.Data = HashImage(im.Data), nil
		want[i] = im
	}
	if !reflect.DeepEqual(msgs[0].Images, want) {
		t.Errorf("images read back as\n%+v\nwant\n%+v", msgs[0].Images, want)
	}
	if len(msgs[0].Attachments) != 1 || !reflect.DeepEqual(msgs[0].Attachments[0], att) {
		t.Errorf("attachment read back as %+v, want %+v", msgs[0].Attachments, att)
	}
	for i, data := range [][]byte{png, jpg} {
		got, err := s.ImageData(ctx, want[i].SHA256)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("image %d's bytes: %q, %v", i, got, err)
		}
	}
	if n := countRows(t, s.db, "images"); n != 2 {
		t.Errorf("%d image rows for two distinct images", n)
	}

	// An edited question sends the same images; AllMessages has them.
	eq, _, err := s.AddQuestionVersion(ctx, q.ID, Message{Content: "and this?"}, Message{Role: "assistant", Status: StatusStreaming})
	if err != nil {
		t.Fatal(err)
	}
	all, _, err := s.AllMessages(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.ID == eq.ID && !reflect.DeepEqual(m.Images, want) {
			t.Errorf("the edited question's images: %+v", m.Images)
		}
	}
	if n := countRows(t, s.db, "images"); n != 2 {
		t.Errorf("%d image rows after the edit, want still 2", n)
	}

	// A message naming an image the database lacks, without its bytes,
	// is refused and adds nothing.
	if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: "x",
		Images: []Image{{SHA256: HashImage([]byte("absent")), Name: "gone.png"}}}); err == nil {
		t.Error("a message with an image neither stored nor carried was saved")
	}

	if err := s.DeleteConversation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := countRows(t, s.db, "images"); n != 0 {
		t.Errorf("%d image rows after the only conversation sending them was removed", n)
	}
}

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
