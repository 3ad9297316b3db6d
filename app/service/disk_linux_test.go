package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/suzuran-app/suzuran/app/modelhost"
)

// TestSendOnAFullDiskStoresNothingHalf keeps the database on a 4 MB tmpfs
// filled to the last page, then frees it a page at a time, sending an
// 8 KB question after each: a question that cannot be saved is refused
// whole (no conversation without its question, no question without its
// reply), until there is room and one is stored whole; the database stays
// sound.
func TestSendOnAFullDiskStoresNothingHalf(t *testing.T) {
	disk := t.TempDir()
	if err := unix.Mount("tmpfs", disk, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v: needs root or CAP_SYS_ADMIN)", err)
	}
	t.Cleanup(func() { unix.Unmount(disk, 0) })
	demo, err := demoDir()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := Open(Options{DatabasePath: filepath.Join(disk, "suzuran.db"), SettingsPath: filepath.Join(t.TempDir(), "settings.json"),
		Model: demo, Backend: "cpu", Threads: 1, Version: "test", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	waitModel(t, svc, modelhost.StateReady)
	ui := svc.UI()
	ctx := context.Background()

	filler, err := os.Create(filepath.Join(disk, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	page := make([]byte, 4096)
	for {
		if _, err := filler.Write(page); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	size, _ := filler.Seek(0, 1)

	question := strings.Repeat("How do I join paths in Python? ", 270) // 8 KB
	refused, stored := 0, 0
	for stored == 0 && size > 0 {
		size -= 4096
		if err := filler.Truncate(size); err != nil {
			t.Fatal(err)
		}
		res, err := ui.Send(SendRequest{Text: question})
		if err != nil {
			refused++
			if !strings.Contains(err.Error(), "could not be saved") {
				t.Errorf("refused with %q, want it to say the question could not be saved", err)
			}
		} else {
			stored++
			ui.Stop(res.Conversation.ID)
		}
		convs, err := svc.store.Conversations(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(convs) != stored {
			t.Fatalf("after %d refused and %d stored questions: %d conversations", refused, stored, len(convs))
		}
		for _, c := range convs {
			_, msgs, err := svc.store.Conversation(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 2 || msgs[0].Role != "user" || msgs[0].Content != strings.TrimSpace(question) || msgs[1].Role != "assistant" {
				t.Fatalf("conversation %d holds %d messages, want the question and its reply", c.ID, len(msgs))
			}
		}
	}
	t.Logf("%d questions refused on the full disk, then one stored whole with %d KB freed", refused, refused*4+4)
	if refused == 0 || stored == 0 {
		t.Fatalf("refused %d, stored %d: the disk was not full, or never had room", refused, stored)
	}
	filler.Truncate(0)
	if err := svc.store.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}
