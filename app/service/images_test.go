package service

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/docs"
	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/store"
	"github.com/suzuran-app/suzuran/engine"
)

// vlTinyDir is the random-weight vision-language fixture model.
const vlTinyDir = "../../engine/internal/fixtures/testdata/qwen35moe-vl-tiny"

// TestAttachmentRecordSurvivesReopen stores a document's whole record,
// reopens the database and reads back every field, the cut, the encoding
// and the notes among them.
func TestAttachmentRecordSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	att := docs.Attachment{Name: "old.txt", Size: 4000, SHA256: "ef01", Format: docs.Format("text"), Type: "text/plain",
		Pages: 3, PageUnit: "pages", Encoding: "windows-1252", Text: "[…]the end", Tokens: 12,
		Notes: []string{"2 lines were not in windows-1252"}, Cut: &docs.Cut{Keep: docs.KeepEnd, OriginalTokens: 900, KeptTokens: 8}}
	c, _, _, err := db.AddTurn(ctx, store.Conversation{Title: "doc"},
		store.Message{Role: "user", Content: "q", Attachments: []store.Attachment{toStored(att)}}, store.Message{Role: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = store.Open(path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, msgs, err := db.Conversation(ctx, c.ID)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%+v, %v", msgs, err)
	}
	if got := fromStored(msgs[0].Attachments); len(got) != 1 || !reflect.DeepEqual(got[0], att) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, []docs.Attachment{att})
	}
}

func readImage(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vlTinyDir, "images", name))
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(data)
}

// TestImageAskReopenRegenerate sends a PNG to the tiny vision model: its
// token cost is known before sending, the question keeps it, the model's
// prompt holds its tokens, a restart still has it (and its picture), and
// a regenerated answer reads it again from the prefix cache.
func TestImageAskReopenRegenerate(t *testing.T) {
	dir := t.TempDir()
	open := func() *testService {
		svc, err := Open(Options{DatabasePath: filepath.Join(dir, "s.db"), SettingsPath: filepath.Join(dir, "settings.json"),
			PrefixDir: filepath.Join(dir, "prefix"), Model: filepath.Join(vlTinyDir, "hf-bf16"), Backend: "cpu", Threads: 1, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		waitModel(t, svc, modelhost.StateReady)
		return &testService{Service: svc, ui: svc.UI()}
	}
	svc := open()
	// A small context keeps the test quick: the tiny model never says
	// EOS, its answers fill the context.
	set := svc.Settings()
	set.ContextTokens = 512
	if _, err := svc.SaveSettings(set); err != nil {
		t.Fatal(err)
	}
	waitModel(t, svc.Service, modelhost.StateLoading)
	waitModel(t, svc.Service, modelhost.StateReady)
	v, err := svc.ui.AttachImage("/some/folder/image1.png", readImage(t, "image1.png"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Image.Name != "image1.png" || v.Image.MIME != "image/png" || v.Image.Tokens <= 0 || v.Image.Width <= 0 || v.Note != "" ||
		!strings.HasPrefix(v.URL, "data:image/png;base64,") || v.SeenWidth%32 != 0 || v.SeenHeight%32 != 0 {
		t.Fatalf("attached %+v", v.Image)
	}
	res, err := svc.ui.Send(SendRequest{Text: "What is in the picture?", Images: []string{v.Image.SHA256}})
	if err != nil {
		t.Fatal(err)
	}
	reply := waitReply(t, svc.Service, res.Reply.ID)
	if reply.Status != store.StatusComplete || reply.Stats == nil || reply.Stats.PromptTokens <= v.Image.Tokens {
		t.Fatalf("reply %+v %+v: want one whose prompt holds the image's %d tokens", reply, reply.Stats, v.Image.Tokens)
	}
	// Sent, the image is no longer attached.
	if _, err := svc.ui.Send(SendRequest{ConversationID: res.Conversation.ID, Text: "again", Images: []string{v.Image.SHA256}}); err == nil {
		t.Error("a sent image could be sent a second time without attaching it again")
	}
	again, err := svc.ui.Regenerate(res.Conversation.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	second := waitReply(t, svc.Service, again.ID)
	if second.Status != store.StatusComplete || second.Stats.PromptTokens != reply.Stats.PromptTokens {
		t.Fatalf("regenerated %+v %+v; want the same prompt as before (%d tokens)", second, second.Stats, reply.Stats.PromptTokens)
	}
	if second.Stats.CachedTokens < v.Image.Tokens {
		t.Errorf("the regenerated answer reused %d cached tokens; the image alone is %d", second.Stats.CachedTokens, v.Image.Tokens)
	}
	svc.Close()

	svc = open()
	cv, err := svc.ui.Conversation(res.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cv.Messages) != 2 || len(cv.Messages[0].Images) != 1 || cv.Messages[0].Images[0].SHA256 != v.Image.SHA256 ||
		cv.Messages[0].Images[0].Tokens != v.Image.Tokens {
		t.Fatalf("reopened: %+v", cv.Messages)
	}
	if url, err := svc.ui.ImageURL(v.Image.SHA256); err != nil || url != v.URL {
		t.Errorf("the stored picture differs from the attached one (%v)", err)
	}
	// An edited question sends the same image.
	edited, err := svc.ui.Edit(cv.Messages[0].ID, "And now?", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(edited.Question.Images) != 1 || edited.Question.Images[0].SHA256 != v.Image.SHA256 {
		t.Errorf("the edited question's images: %+v", edited.Question.Images)
	}
	if r := waitReply(t, svc.Service, edited.Reply.ID); r.Status != store.StatusComplete || r.Stats.PromptTokens <= v.Image.Tokens {
		t.Errorf("the edited question's reply %+v %+v: want its prompt to hold the image", r, r.Stats)
	}
}

// TestImagesOverTheContextAreRefused: images that do not fit beside the
// conversation are refused before anything is stored, saying what to do.
func TestImagesOverTheContextAreRefused(t *testing.T) {
	svc := newTestService(t, filepath.Join(vlTinyDir, "hf-bf16"))
	set := svc.Settings()
	set.ContextTokens = 512
	if _, err := svc.SaveSettings(set); err != nil {
		t.Fatal(err)
	}
	waitModel(t, svc.Service, modelhost.StateLoading)
	waitModel(t, svc.Service, modelhost.StateReady)
	// A 1024 × 1024 picture is 1,024 tokens at the default size limit.
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 1024, 1024))); err != nil {
		t.Fatal(err)
	}
	v, err := svc.ui.AttachImage("big.png", base64.StdEncoding.EncodeToString(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if v.Image.Tokens != 1024 {
		t.Errorf("a 1024 × 1024 image costs %d tokens, want 1,024", v.Image.Tokens)
	}
	_, err = svc.ui.Send(SendRequest{Text: "compare", Images: []string{v.Image.SHA256}})
	if err == nil || !strings.Contains(err.Error(), "fewer images") {
		t.Fatalf("Send: %v; want a refusal saying to send fewer or smaller images", err)
	}
	if cs, _ := svc.ui.Conversations(""); len(cs) != 0 {
		t.Errorf("a refused question was stored: %+v", cs)
	}
}

// TestDemoModelKeepsImagesAndSaysItReadsNone: the demo model has no
// vision tower; the image's chip says so before sending, the question
// keeps the image and the reply says what to do.
func TestDemoModelKeepsImagesAndSaysItReadsNone(t *testing.T) {
	svc := newTestService(t, demo(t))
	v, err := svc.ui.AttachImage("image1.png", readImage(t, "image1.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.Note, "reads no images") {
		t.Errorf("note %q: want it to say the model reads no images", v.Note)
	}
	res, err := svc.ui.Send(SendRequest{Text: "What is it?", Images: []string{v.Image.SHA256}})
	if err != nil {
		t.Fatal(err)
	}
	reply := waitReply(t, svc.Service, res.Reply.ID)
	if reply.Status != store.StatusError || !strings.Contains(reply.Error, engine.ErrNoVision.Error()) {
		t.Errorf("reply %+v: want an error saying the model reads no images", reply)
	}
	cv, _ := svc.ui.Conversation(res.Conversation.ID)
	if len(cv.Messages) == 0 || len(cv.Messages[0].Images) != 1 {
		t.Errorf("the question lost its image: %+v", cv.Messages)
	}
}

// TestBadImageIsRefusedClearly: a file that is not an image says so.
func TestBadImageIsRefusedClearly(t *testing.T) {
	svc := newTestService(t, demo(t))
	if _, err := svc.ui.AttachImage("x.png", base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\ntruncated"))); err == nil || !strings.Contains(err.Error(), "x.png") {
		t.Errorf("a truncated PNG: %v; want an error naming the file", err)
	}
}

// TestImageFilesBecomeImageChips: an image dropped on the desktop (a
// path) or in a browser (its bytes) is a chip ready at once with its
// picture and cost, and Send and CheckFit take the chip's id.
func TestImageFilesBecomeImageChips(t *testing.T) {
	svc := newTestService(t, filepath.Join(vlTinyDir, "hf-bf16"))
	path, _ := filepath.Abs(filepath.Join(vlTinyDir, "images", "image2.png"))
	views := svc.ui.AttachFiles([]string{path})
	if len(views) != 1 || views[0].State != AttachmentReady || views[0].Image == nil || views[0].Image.Image.Tokens <= 0 {
		t.Fatalf("AttachFiles: %+v", views)
	}
	v, err := svc.ui.AttachData("pasted.png", readImage(t, "image1.png"))
	if err != nil || v.State != AttachmentReady || v.Image == nil || v.Image.Image.Name != "pasted.png" {
		t.Fatalf("AttachData: %+v, %v", v, err)
	}
	req := SendRequest{Text: "Compare them.", Attachments: []string{views[0].ID, v.ID}}
	fit, err := svc.ui.CheckFit(req)
	if err != nil || !fit.Fits || fit.ImageTokens != views[0].Image.Image.Tokens+v.Image.Image.Tokens {
		t.Fatalf("CheckFit: %+v, %v", fit, err)
	}
	res, err := svc.ui.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Question.Images) != 2 || res.Question.Images[0].Name != "image2.png" || res.Question.Images[1].Name != "pasted.png" || len(res.Question.Attachments) != 0 {
		t.Errorf("question %+v", res.Question)
	}
	svc.ui.Stop(res.Conversation.ID)
	waitReply(t, svc.Service, res.Reply.ID)
}
