//go:build unix

package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// holderEnv makes the test binary the first process of TestSecondProcess:
// it opens the database named by the variable, leaves a conversation
// deleted (still restorable) and a reply streaming, prints their ids, and
// holds the database until its standard input closes; then it checks that
// both are as it left them and says so.
const holderEnv = "STORE_TEST_HOLD"

func TestMain(m *testing.M) {
	if path := os.Getenv(holderEnv); path != "" {
		if err := hold(path); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func hold(path string) error {
	ctx := context.Background()
	s, err := Open(path)
	if err != nil {
		return err
	}
	defer s.Close()
	if s.ReadOnly() != "" {
		return fmt.Errorf("the first process opened the database read-only: %s", s.ReadOnly())
	}
	gone, err := s.CreateConversation(ctx, "deleted, undo still offered")
	if err != nil {
		return err
	}
	if err := s.DeleteConversation(ctx, gone.ID); err != nil {
		return err
	}
	live, err := s.CreateConversation(ctx, "a reply being written")
	if err != nil {
		return err
	}
	reply, err := s.AddMessage(ctx, Message{ConversationID: live.ID, Role: "assistant", Content: "so far", Status: StatusStreaming})
	if err != nil {
		return err
	}
	fmt.Println(gone.ID, reply.ID)
	bufio.NewReader(os.Stdin).ReadString('\n') // until the test closes it
	got, err := s.Message(ctx, reply.ID)
	if err != nil || got.Status != StatusStreaming {
		return fmt.Errorf("the live reply is %+v (%v), want it still streaming", got, err)
	}
	if err := s.RestoreConversation(ctx, gone.ID); err != nil {
		return fmt.Errorf("the deleted conversation can no longer be restored: %w", err)
	}
	fmt.Println("intact")
	return nil
}

// TestSecondProcess runs a second process on one database: it opens it
// read-only, says which process owns it, refuses writes, and leaves the
// owner's deleted conversation and live reply alone. Once the owner has
// gone, the next Open owns the database again.
func TestSecondProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "suzuran.db")
	first := exec.Command(os.Args[0], "-test.run=^$")
	first.Env = append(os.Environ(), holderEnv+"="+path)
	first.Stderr = os.Stderr
	stdin, _ := first.StdinPipe()
	stdout, _ := first.StdoutPipe()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	out := bufio.NewReader(stdout)
	var gone, reply int64
	if line, err := out.ReadString('\n'); err != nil {
		t.Fatalf("the first process did not start: %v", err)
	} else if _, err := fmt.Sscan(line, &gone, &reply); err != nil {
		t.Fatalf("the first process said %q", line)
	}

	second, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	why := second.ReadOnly()
	if !strings.Contains(why, fmt.Sprintf("another Suzuran process (process id %d) is using %s", first.Process.Pid, path)) {
		t.Errorf("ReadOnly() = %q, want it to name the owning process and the file", why)
	}
	if got, err := second.Message(ctx, reply); err != nil || got.Status != StatusStreaming || got.Content != "so far" {
		t.Errorf("the second process reads the live reply as %+v (%v), want it streaming", got, err)
	}
	list, err := second.Conversations(ctx, "")
	if err != nil || len(list) != 1 {
		t.Errorf("the second process lists %+v (%v), want the one conversation not deleted", list, err)
	}
	if _, err := second.CreateConversation(ctx, "from the second process"); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "quit the other one") {
		t.Errorf("a write from the second process: %v, want ErrReadOnly saying what to do", err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}

	stdin.Close()
	if line, _ := out.ReadString('\n'); strings.TrimSpace(line) != "intact" {
		t.Fatalf("the first process found: %q", line)
	}
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}

	// The owner has ended (its reply was left streaming, as a crash leaves
	// it): the next Open owns the database and tidies it up.
	third, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if third.ReadOnly() != "" {
		t.Fatalf("after the owner ended: read-only (%s)", third.ReadOnly())
	}
	if got, err := third.Message(ctx, reply); err != nil || got.Status != StatusInterrupted {
		t.Errorf("after the owner ended the reply is %+v (%v), want interrupted", got, err)
	}
}
