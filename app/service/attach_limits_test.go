package service

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/server"
)

// TestUnsentAttachmentsExpire attaches a file and never sends it: after the
// time to live (shortened to 300 ms here; AttachmentTTL in use) it is let
// go, the window is told why, sending it says it is gone, and it no longer
// counts against the budget.
func TestUnsentAttachmentsExpire(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	svc.attach.ttl = 300 * time.Millisecond
	events, stop := svc.Subscribe()
	defer stop()
	v := attachData(t, svc, "notes.txt", []byte(strings.Repeat("some notes\n", 1000)))
	if v.State != AttachmentReady {
		t.Fatalf("%+v", v)
	}
	deadline := time.After(30 * time.Second)
	for expired := false; !expired; {
		select {
		case ev := <-events:
			a := ev.Attachment
			expired = ev.Type == EventAttachment && a != nil && a.ID == v.ID && a.State == AttachmentFailed &&
				strings.Contains(a.Error, "was not sent within") && strings.Contains(a.Error, "attach it again")
		case <-deadline:
			t.Fatal("no event telling the window the attachment expired")
		}
	}
	if _, err := svc.ui.Send(SendRequest{Text: "what do the notes say?", Attachments: []string{v.ID}}); err == nil || !strings.Contains(err.Error(), "is gone") {
		t.Errorf("sending an expired attachment: %v, want it to say the attachment is gone", err)
	}
	svc.attach.mu.Lock()
	held, pending := svc.attach.held, len(svc.attach.pending)
	svc.attach.mu.Unlock()
	if held != 0 || pending != 0 {
		t.Errorf("after expiry: %d bytes held by %d pending attachments, want none", held, pending)
	}
}

// TestAttachmentBudget bounds what unsent attachments hold (shortened to
// 1 MB here; AttachmentBudget in use): a second 600 KB upload is refused
// with a message saying what to do, and taken once the first is removed.
// An upload larger than MaxUploadBytes is refused before it is decoded.
func TestAttachmentBudget(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	svc.attach.budget = 1 << 20
	file := []byte(strings.Repeat("a line of a log file\n", 600<<10/21))
	first := attachData(t, svc, "one.log", file)
	_, err := svc.ui.AttachData("two.log", base64.StdEncoding.EncodeToString(file))
	if err == nil || !strings.Contains(err.Error(), "Send or remove some first") {
		t.Fatalf("a second upload past the budget: %v, want a refusal saying what to do", err)
	}
	t.Log(err)
	svc.ui.RemoveAttachment(first.ID)
	attachData(t, svc, "two.log", file)

	huge := base64.StdEncoding.EncodeToString(make([]byte, MaxUploadBytes+1))
	if _, err := svc.ui.AttachData("huge.bin", huge); err == nil || !strings.Contains(err.Error(), "files of up to") {
		t.Errorf("an upload over MaxUploadBytes: %v, want a refusal naming the limit", err)
	}
}

// TestLargestUploadPassesTheServer uploads a file of MaxUploadBytes with a
// long name through the API server that serves the browser UI (its
// default body limit): it is taken, not a 413; one byte more is refused by
// the service with a message naming the limit, which the window shows.
func TestLargestUploadPassesTheServer(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	api, err := server.New(server.Config{Addr: "127.0.0.1:0", Models: svc.Models(), UI: Handler(svc.Service, nil), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Start(); err != nil {
		t.Fatal(err)
	}
	defer api.Shutdown(context.Background())
	name := strings.Repeat("n", 250) + ".txt"
	for _, tc := range []struct {
		size   int
		status int
	}{{MaxUploadBytes, 200}, {MaxUploadBytes + 3, 422}} {
		args, _ := json.Marshal([]string{name, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x\n"), tc.size/2+tc.size%2)[:tc.size])})
		status, out := call(t, "http://"+api.Addr(), "AttachData", string(args))
		if status != tc.status {
			t.Errorf("a %d-byte upload: %d %+v, want %d", tc.size, status, out, tc.status)
		}
		if tc.status != 200 && !strings.Contains(out.Error, "files of up to") {
			t.Errorf("a %d-byte upload: %q, want the limit named", tc.size, out.Error)
		}
	}
}
