package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFullDiskStartsReadOnly opens a database, closed cleanly, on a 1 MB
// tmpfs that another program has filled: Open says the disk is full and
// how much to free, not that the file may be damaged, and opens it
// read-only with every conversation there. Once space is freed it opens
// for writing again.
func TestFullDiskStartsReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a 1 MB tmpfs to fill (%v: needs root or CAP_SYS_ADMIN)", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	path := filepath.Join(dir, "suzuran.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.CreateConversation(ctx, "kept through a full disk")
	if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			break
		}
	}
	f.Close()

	s, err = Open(path)
	if err != nil {
		t.Fatalf("Open on a full disk: %v; want it open read-only", err)
	}
	why := s.ReadOnly()
	t.Log(why)
	if !strings.Contains(why, "is full") || !strings.Contains(why, "needs at least 33.6 MB free") || !strings.Contains(why, "free up") {
		t.Errorf("ReadOnly() = %q, want it to say the disk is full and how much to free", why)
	}
	list, err := s.Conversations(ctx, "")
	if err != nil || len(list) != 1 || list[0].Title != c.Title {
		t.Fatalf("conversations on the full disk: %+v, %v; want the one saved", list, err)
	}
	if _, msgs, err := s.Conversation(ctx, c.ID); err != nil || len(msgs) != 1 || msgs[0].Content != "hello" {
		t.Errorf("messages on the full disk: %+v, %v", msgs, err)
	}
	if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: "more"}); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "is full") {
		t.Errorf("a write on the full disk: %v, want ErrReadOnly saying the disk is full", err)
	}
	s.Close()

	os.Remove(filler)
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ReadOnly() != "" {
		t.Fatalf("with space freed: read-only (%s)", s.ReadOnly())
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: "more"}); err != nil {
		t.Fatal(err)
	}
}
