package service

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/store"
)

// waitAttached waits until an attachment is no longer being read.
func waitAttached(t *testing.T, svc *Service, id string) AttachmentView {
	t.Helper()
	var v AttachmentView
	awaitEvent(t, svc, 60*time.Second, "the end of reading attachment "+id, func(*Event) bool {
		svc.attach.mu.Lock()
		p := svc.attach.pending[id]
		if p != nil {
			v = p.view
		}
		svc.attach.mu.Unlock()
		if p == nil {
			t.Fatalf("attachment %s is gone", id)
		}
		return v.State != AttachmentReading
	})
	return v
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
		waitModel(t, svc, modelhost.StateReady)
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
		{"photo.png", pngData.Bytes(), "is a PNG image (image/png); images can't be attached yet"},
		{"empty.txt", nil, "is empty (0 bytes)"},
	} {
		// The chip shows the name, then the message: not the name twice.
		v := attachData(t, svc, tc.name, tc.data)
		if v.State != AttachmentFailed || !strings.HasPrefix(v.Error, tc.want) || v.Attachment != nil {
			t.Errorf("%s: %+v; want failed with %q", tc.name, v, tc.want)
		}
		if _, err := svc.ui.Send(SendRequest{Text: "what is it?", Attachments: []string{v.ID}}); err == nil || !strings.HasPrefix(err.Error(), tc.name+": "+tc.want) {
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
	waitModel(t, svc.Service, modelhost.StateLoading)
	waitModel(t, svc.Service, modelhost.StateReady)
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

// A 15 MB text file (just under the 16,000,000-character limit) dropped on
// the window (AttachFiles, the desktop's path): its chip reports progress
// while the file is read and while its tokens are counted, each against
// the exact size; removing it while the tokens are counted stops the work,
// which ends cancelled rather than counted, and leaves nothing behind.
func TestAttachProgressAndCancel(t *testing.T) {
	const size = 15 << 20
	line := []byte("All work and no play makes Jack a dull boy.\n")
	big := append(bytes.Repeat(line, size/len(line)), line[:size%len(line)]...)
	path := filepath.Join(t.TempDir(), "big.log")
	if err := os.WriteFile(path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	svc := newTestService(t, mustDemo(t))
	events, stop := svc.Subscribe()
	defer stop()
	start := time.Now()
	views := svc.ui.AttachFiles([]string{path})
	if len(views) != 1 || views[0].Name != "big.log" || views[0].State != AttachmentReading {
		t.Fatalf("AttachFiles returned %+v", views)
	}
	id := views[0].ID

	// Progress: the file read, then its tokens counted, each stage
	// counting bytes up to the file's exact size, never backwards.
	var firstCount, lastCount AttachmentView
	var firstCountAt time.Time
	stages := map[string]int{}
	timeout := time.After(2 * time.Minute)
	for lastCount.Done == 0 || lastCount.Done == firstCount.Done {
		select {
		case ev := <-events:
			v := ev.Attachment
			if ev.Type != EventAttachment || v.ID != id {
				continue
			}
			if v.State != AttachmentReading {
				t.Fatalf("finished before it could be cancelled: %+v", v)
			}
			if v.Done == 0 && v.Total == 0 && v.Unit == "" {
				continue // the chip's announcement, before any progress
			}
			stages[v.Stage]++
			if v.Unit != "bytes" || v.Total != size || v.Done <= 0 || v.Done > size {
				t.Fatalf("progress %+v; want 0 < done ≤ total = %d bytes", v, size)
			}
			if v.Stage == "counting" {
				if firstCount.Done == 0 {
					firstCount, firstCountAt = *v, time.Now()
				} else if v.Done < lastCount.Done {
					t.Fatalf("counting went back from %d to %d", lastCount.Done, v.Done)
				}
				lastCount = *v
			} else if v.Stage != "reading" {
				t.Fatalf("progress in stage %q: %+v", v.Stage, v)
			}
		case <-timeout:
			t.Fatalf("no counting progress within two minutes (stages seen: %v)", stages)
		}
	}
	// Reading reports every megabyte: at least 15 reports.
	if stages["reading"] < size>>20 {
		t.Errorf("%d reading reports for %d MB", stages["reading"], size>>20)
	}
	t.Logf("read in %v; counting reached %d of %d bytes after %v", firstCountAt.Sub(start), lastCount.Done, size, time.Since(firstCountAt))

	svc.attach.mu.Lock()
	p := svc.attach.pending[id]
	svc.attach.mu.Unlock()
	removed := time.Now()
	svc.ui.RemoveAttachment(id)
	_, err := svc.readyAttachments([]string{id})
	if want := "attachment " + id + " is gone (removed, or already sent): attach the file again"; err == nil || err.Error() != want {
		t.Fatalf("after removal: %v; want %s", err, want)
	}
	// The reading goroutine ends at the counter's next check, and ends
	// cancelled: had the count gone on to the end, the chip would be ready.
	ended := make(chan struct{})
	go func() { svc.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the reading goes on 30 s after the removal")
	}
	svc.attach.mu.Lock()
	final := p.view
	svc.attach.mu.Unlock()
	if final.State != AttachmentFailed || final.Error != "counting tokens cancelled" || final.Attachment != nil {
		t.Errorf("the removed chip ended %+v; want failed with \"counting tokens cancelled\"", final)
	}
	t.Logf("stopped %v after the removal", time.Since(removed))
	// No event about it after the removal: the reading ended without
	// announcing a result.
	quiet := time.After(time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Type == EventAttachment && ev.Attachment.ID == id {
				t.Fatalf("a removed attachment reported %+v", ev.Attachment)
			}
		case <-quiet:
			return
		}
	}
}

// A text file read from the wrong encoding is read again from the one the
// user chooses: a new chip replaces the old, with the text decoded as
// asked; other chips and unknown encodings are refused, saying why.
func TestRereadAttachmentWithAnotherEncoding(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	// "Lily of the valley" in Russian, in KOI8-R.
	koi8 := []byte{0xEC, 0xC1, 0xCE, 0xC4, 0xD9, 0xDB, 0x20, 0xCD, 0xC1, 0xCA, 0xD3, 0xCB, 0xC9, 0xCA, 0x20, '6', '1', '2', '0'}
	v := attachData(t, svc, "notes.txt", koi8)
	if v.State != AttachmentReady || v.Encoding == "" {
		t.Fatalf("attached %+v: want it read, with its encoding", v)
	}
	if _, err := svc.ui.RereadAttachment(v.ID, "EBCDIC"); err == nil || !strings.Contains(err.Error(), "choose one of UTF-8") {
		t.Errorf("unknown encoding: %v", err)
	}
	next, err := svc.ui.RereadAttachment(v.ID, "koi8-r")
	if err != nil {
		t.Fatal(err)
	}
	if next.ID == v.ID || next.State != AttachmentReading || next.Name != "notes.txt" {
		t.Fatalf("reread returned %+v", next)
	}
	got := waitAttached(t, svc.Service, next.ID)
	if got.State != AttachmentReady || got.Encoding != "KOI8-R" {
		t.Fatalf("read again: %+v", got)
	}
	svc.attach.mu.Lock()
	text := svc.attach.pending[next.ID].doc.Text
	_, old := svc.attach.pending[v.ID]
	held, charge := svc.attach.held, svc.attach.pending[next.ID].charge
	svc.attach.mu.Unlock()
	if !strings.Contains(text, "Ландыш майский 6120") || old {
		t.Errorf("text %q (old chip still there: %v); want the KOI8-R reading alone", text, old)
	}
	// Its text and its upload are held, once.
	if want := int64(len(text) + len(koi8)); charge != want || held != want {
		t.Errorf("held %d, charge %d; want %d (text and upload)", held, charge, want)
	}
	if _, err := svc.ui.RereadAttachment(v.ID, "KOI8-R"); err == nil || !strings.Contains(err.Error(), "attach the file again") {
		t.Errorf("the replaced chip: %v", err)
	}
	csv := attachData(t, svc, "x.pdf", []byte("%PDF-1.4 not really"))
	if _, err := svc.ui.RereadAttachment(csv.ID, "KOI8-R"); err == nil || !strings.Contains(err.Error(), "only a text file") {
		t.Errorf("a file that is not text (%s): %v", csv.State, err)
	}
	svc.ui.RemoveAttachment(next.ID)
	svc.ui.RemoveAttachment(csv.ID)
	svc.attach.mu.Lock()
	defer svc.attach.mu.Unlock()
	if svc.attach.held != 0 {
		t.Errorf("%d bytes held with no chip left", svc.attach.held)
	}
}
