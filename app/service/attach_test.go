package service

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"image"
	"image/png"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/app/store"
)

// waitAttached waits until an attachment is no longer being read.
func waitAttached(t *testing.T, svc *Service, id string) AttachmentView {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		svc.attach.mu.Lock()
		p := svc.attach.pending[id]
		var v AttachmentView
		if p != nil {
			v = p.view
		}
		svc.attach.mu.Unlock()
		if p == nil {
			t.Fatalf("attachment %s is gone", id)
		}
		if v.State != AttachmentReading {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("attachment %s still reading: %+v", id, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func attachData(t *testing.T, svc *testService, name string, data []byte) AttachmentView {
	t.Helper()
	v, err := svc.ui.AttachData(name, base64.StdEncoding.EncodeToString(data))
	if err != nil {
		t.Fatal(err)
	}
	if v.State != AttachmentReading || v.Name != name {
		t.Fatalf("AttachData returned %+v; want %s being read", v, name)
	}
	return waitAttached(t, svc.Service, v.ID)
}

// joinSlack is how far a prompt's length may differ from the budget's
// count of its parts (see TestAttachAskReopenContinue); far less than the
// room kept for the answer, so the prompt and its answer still fit.
const joinSlack = 4

const stockCSV = "flower,stock\niris,42\ntulip,7\n"

// A CSV attached, asked about, answered; the conversation reopened in a new
// run of the app still has it, shows it, and sends it again with the next
// question.
func TestAttachAskReopenContinue(t *testing.T) {
	dir := t.TempDir()
	demo, err := demoDir()
	if err != nil {
		t.Fatal(err)
	}
	open := func() *testService {
		svc, err := Open(Options{DatabasePath: filepath.Join(dir, "s.db"), SettingsPath: filepath.Join(dir, "settings.json"),
			Model: demo, Backend: "cpu", Threads: 1, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		waitModel(t, svc, server.StateReady)
		return &testService{Service: svc, ui: svc.UI()}
	}
	svc := open()
	v := attachData(t, svc, "stock.csv", []byte(stockCSV))
	sum := sha256.Sum256([]byte(stockCSV))
	a := v.Attachment
	if v.State != AttachmentReady || a == nil || a.Name != "stock.csv" || a.Size != int64(len(stockCSV)) ||
		a.SHA256 != hex.EncodeToString(sum[:]) || a.Tokens <= 0 || !strings.Contains(a.Text, "| iris | 42 |") {
		t.Fatalf("attached %+v %+v", v, a)
	}
	fit, err := svc.ui.CheckFit(SendRequest{Text: "How many irises?", Attachments: []string{v.ID}})
	if err != nil || !fit.Fits || fit.DocumentTokens <= a.Tokens || fit.ConversationTokens <= 0 {
		t.Fatalf("fit %+v, %v; want a fit with the document block counted", fit, err)
	}
	res, err := svc.ui.Send(SendRequest{Text: "How many irises?", Attachments: []string{v.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Question.Attachments) != 1 || res.Question.Attachments[0].Tokens != a.Tokens {
		t.Fatalf("question %+v: want its attachment", res.Question)
	}
	reply := waitReply(t, svc.Service, res.Reply.ID)
	// The prompt held the document: the conversation alone is
	// fit.ConversationTokens. The two are counted apart, so the tokens at
	// their joins (the line breaks around the block) may merge
	// differently: joinSlack tokens either way.
	if d := reply.Stats.PromptTokens - (fit.ConversationTokens + fit.DocumentTokens); reply.Status != store.StatusComplete || d < -joinSlack || d > joinSlack {
		t.Fatalf("reply %+v %+v: want a complete reply to a prompt of %d+%d tokens",
			reply, reply.Stats, fit.ConversationTokens, fit.DocumentTokens)
	}
	if _, err := svc.ui.Send(SendRequest{Text: "again", Attachments: []string{v.ID}}); err == nil || !strings.Contains(err.Error(), "attach the file again") {
		t.Errorf("a sent attachment was accepted again: %v", err)
	}
	svc.Close()

	svc = open()
	defer svc.Close()
	view, err := svc.ui.Conversation(res.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := view.Messages[0].Attachments
	if len(got) != 1 || got[0].Name != "stock.csv" || got[0].SHA256 != a.SHA256 || got[0].Text != a.Text || got[0].Tokens != a.Tokens {
		t.Fatalf("reopened: %+v", view.Messages[0])
	}
	before, err := svc.ui.CheckFit(SendRequest{ConversationID: res.Conversation.ID, Text: "And tulips?"})
	if err != nil {
		t.Fatal(err)
	}
	if before.ConversationTokens <= fit.DocumentTokens {
		t.Errorf("the continued conversation counts %d tokens: its document (%d) is not in it", before.ConversationTokens, fit.DocumentTokens)
	}
	next, err := svc.ui.Send(SendRequest{ConversationID: res.Conversation.ID, Text: "And tulips?"})
	if err != nil {
		t.Fatal(err)
	}
	reply = waitReply(t, svc.Service, next.Reply.ID)
	if reply.Stats == nil || reply.Stats.PromptTokens != before.ConversationTokens {
		t.Fatalf("follow-up reply %+v: want a prompt of %d tokens, the document included", reply.Stats, before.ConversationTokens)
	}
}

func TestAttachRefusals(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	var pngData bytes.Buffer
	png.Encode(&pngData, image.NewRGBA(image.Rect(0, 0, 4, 4)))
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"photo.png", pngData.Bytes(), "photo.png: is a PNG image (image/png); images can't be attached yet"},
		{"empty.txt", nil, "empty.txt: "},
	} {
		v := attachData(t, svc, tc.name, tc.data)
		if v.State != AttachmentFailed || !strings.HasPrefix(v.Error, tc.want) || v.Attachment != nil {
			t.Errorf("%s: %+v; want failed with %q", tc.name, v, tc.want)
		}
		if _, err := svc.ui.Send(SendRequest{Text: "what is it?", Attachments: []string{v.ID}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: sending a failed attachment: %v", tc.name, err)
		}
		svc.ui.RemoveAttachment(v.ID)
	}
	if _, err := svc.ui.AttachData("x.txt", "not base64!"); err == nil || !strings.Contains(err.Error(), "x.txt") {
		t.Errorf("bad base64: %v", err)
	}
	if _, err := svc.ui.ChooseFiles(); err == nil || !strings.Contains(err.Error(), "file upload") {
		t.Errorf("ChooseFiles without a dialog: %v", err)
	}
	if cs, _ := svc.ui.Conversations(""); len(cs) != 0 {
		t.Errorf("refused sends left conversations: %+v", cs)
	}
}

func mustDemo(t *testing.T) string {
	d, err := demoDir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A document larger than the context: refused with the numbers unless the
// user chose, and each choice keeps its end of the document.
func TestAttachBudgetChoices(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	settings := svc.Settings()
	settings.ContextTokens = 512
	if _, err := svc.SaveSettings(settings); err != nil {
		t.Fatal(err)
	}
	waitModel(t, svc.Service, server.StateLoading)
	waitModel(t, svc.Service, server.StateReady)
	var long strings.Builder
	for i := 1; i <= 400; i++ {
		fmt.Fprintf(&long, "line %d of the log\n", i)
	}
	attach := func() string { return attachData(t, svc, "big.log.txt", []byte(long.String())).ID }

	id := attach()
	req := SendRequest{Text: "What happened?", Attachments: []string{id}}
	fit, err := svc.ui.CheckFit(req)
	if err != nil {
		t.Fatal(err)
	}
	if fit.Fits || fit.ContextTokens != 512 || fit.AnswerTokens != 128 ||
		fit.AvailableTokens != 512-fit.ConversationTokens-128 || fit.OverTokens != fit.DocumentTokens-fit.AvailableTokens ||
		!strings.Contains(fit.Message, "tokens too many") {
		t.Fatalf("fit %+v", fit)
	}
	if _, err := svc.ui.Send(req); err == nil || err.Error() != fit.Message {
		t.Fatalf("sending without a choice: %v; want the fit message", err)
	}
	if cs, _ := svc.ui.Conversations(""); len(cs) != 0 {
		t.Fatalf("a refused send left conversations: %+v", cs)
	}
	for _, tc := range []struct {
		keep, has, hasNot string
	}{
		{KeepBeginning, "line 1 of the log\n", "line 400 of the log"},
		{KeepEnd, "line 400 of the log", "line 1 of the log\n"},
	} {
		if tc.keep == KeepEnd {
			id = attach()
		}
		res, err := svc.ui.Send(SendRequest{Text: "What happened?", Attachments: []string{id}, Keep: tc.keep})
		if err != nil {
			t.Fatalf("keep %s: %v", tc.keep, err)
		}
		a := res.Question.Attachments[0]
		if a.Kept != tc.keep || a.OriginalTokens <= a.Tokens || !strings.Contains(a.Text, tc.has) || strings.Contains(a.Text, tc.hasNot) {
			t.Errorf("keep %s: stored %+v", tc.keep, a)
		}
		reply := waitReply(t, svc.Service, res.Reply.ID)
		if reply.Stats == nil || reply.Stats.PromptTokens > 512-128+joinSlack {
			t.Errorf("keep %s: prompt of %+v tokens; want at most %d", tc.keep, reply.Stats, 512-128+joinSlack)
		}
	}
}

// A large file reports progress while it is read, and removing it stops
// the reading.
func TestAttachProgressAndCancel(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	events, stop := svc.Subscribe()
	defer stop()
	big := bytes.Repeat([]byte("All work and no play makes Jack a dull boy.\n"), 30<<20/44)
	v, err := svc.ui.AttachData("big.txt", base64.StdEncoding.EncodeToString(big))
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(60 * time.Second)
	for progressed := false; !progressed; {
		select {
		case ev := <-events:
			if ev.Type == EventAttachment && ev.Attachment.ID == v.ID {
				if ev.Attachment.State != AttachmentReading {
					t.Fatalf("finished before it could be cancelled: %+v", ev.Attachment)
				}
				progressed = ev.Attachment.Total > 0 && ev.Attachment.Done > 0 && ev.Attachment.Done < ev.Attachment.Total
			}
		case <-timeout:
			t.Fatal("no progress within a minute")
		}
	}
	svc.ui.RemoveAttachment(v.ID)
	if _, err := svc.readyAttachments([]string{v.ID}); err == nil {
		t.Fatal("a removed attachment is still there")
	}
	// No event about it after the removal: the reading ended without
	// announcing a result.
	quiet := time.After(3 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Type == EventAttachment && ev.Attachment.ID == v.ID && ev.Attachment.State != AttachmentReading {
				t.Fatalf("a removed attachment finished: %+v", ev.Attachment)
			}
		case <-quiet:
			return
		}
	}
}
