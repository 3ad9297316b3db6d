package service

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/store"
)

// crashChildEnv makes the test binary act as the app that gets killed:
// TestMain sees it and runs crashChild instead of the tests.
const crashChildEnv = "SUZURAN_CRASH_CHILD_DB"

func TestMain(m *testing.M) {
	// The tests' prefix snapshots stay out of the user's cache folder.
	prefixRoot, err := os.MkdirTemp("", "suzuran-service-prefix-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defaultPrefixDir = func() (string, error) { return prefixRoot, nil }
	if db := os.Getenv(crashChildEnv); db != "" {
		crashChild(db)
		return
	}
	code := m.Run()
	os.RemoveAll(prefixRoot)
	os.Exit(code)
}

// crashChild opens the service on the database and streams an endless
// reply (the random-weight fixture model) in conversation 1, until it is
// killed.
func crashChild(db string) {
	// Greedy decoding: the random model's answer is then the same on every
	// run (a sampled one could draw an early end-of-turn and finish before
	// the kill).
	settings := filepath.Join(filepath.Dir(db), "settings.json")
	greedy := `{"sampling_preset": "custom", "sampling": {"temperature": 0, "top_p": 1, "top_k": 0, "min_p": 0, "presence_penalty": 0}}`
	if err := os.WriteFile(settings, []byte(greedy), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	svc, err := Open(Options{
		DatabasePath: db, SettingsPath: settings,
		Model: tinyDir, Threads: 1, Log: zerolog.Nop(), Pace: 10 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if got := svc.Settings(); got.SamplingPreset != PresetCustom || got.Custom.Temperature != 0 {
		fmt.Fprintf(os.Stderr, "the greedy settings were not taken: %+v\n", got)
		os.Exit(2)
	}
	res, err := svc.UI().Send(SendRequest{ConversationID: 1, Text: "Tell me everything", Think: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(res.Reply.ID)
	time.Sleep(5 * time.Minute) // the parent kills this process mid-answer: that is the crash under test
	os.Exit(3)
}

// TestCrashMidReply kills the app with SIGKILL while a reply streams, and
// opens the database again: the earlier messages are intact, the partial
// reply is there marked interrupted, and SQLite finds the file sound.
func TestCrashMidReply(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "suzuran.db")
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := st.CreateConversation(ctx, "earlier")
	var earlier []store.Message
	for i, role := range []string{"user", "assistant", "user", "assistant"} {
		m, err := st.AddMessage(ctx, store.Message{ConversationID: c.ID, Role: role, Content: fmt.Sprintf("turn %d", i),
			Stats: &store.Stats{GeneratedTokens: i}})
		if err != nil {
			t.Fatal(err)
		}
		earlier = append(earlier, m)
	}
	st.Close()
	if c.ID != 1 {
		t.Fatalf("first conversation has id %d, the child expects 1", c.ID)
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), crashChildEnv+"="+db)
	child.Stderr = os.Stderr
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	var replyID int64
	if _, err := fmt.Fscan(out, &replyID); err != nil {
		t.Fatalf("the child did not start a reply: %v", err)
	}

	// Watch the file as another reader would, until the reply has grown
	// past a few saves.
	watch, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	deadline := time.Now().Add(60 * time.Second)
	var status string
	for seen < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("the reply held %d bytes after 60 s", seen)
		}
		// The reply is written by another process: its database is all
		// there is to watch, and no event crosses to this one.
		time.Sleep(20 * time.Millisecond) // another process writes the reply: the database is read again
		watch.QueryRow(`SELECT length(content) + length(reasoning), status FROM messages WHERE id = ?`, replyID).Scan(&seen, &status)
		if status != "" && status != store.StatusStreaming {
			t.Fatalf("the reply ended (%s) after %d bytes, before the kill", status, seen)
		}
	}
	watch.Close()
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()

	st, err = store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	_, msgs, err := st.Conversation(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(earlier)+2 {
		t.Fatalf("%d messages after the crash, want %d", len(msgs), len(earlier)+2)
	}
	for i, want := range earlier {
		got := msgs[i]
		if got.Content != want.Content || got.Role != want.Role || got.Status != store.StatusComplete ||
			got.Stats == nil || got.Stats.GeneratedTokens != i {
			t.Errorf("message %d after the crash: %+v, want %+v", i, got, want)
		}
	}
	if q := msgs[len(earlier)]; q.Content != "Tell me everything" {
		t.Errorf("the question: %+v", q)
	}
	reply := msgs[len(msgs)-1]
	if reply.ID != replyID || reply.Status != store.StatusInterrupted || len(reply.Content)+len(reply.Reasoning) < seen {
		t.Errorf("the partial reply: id %d, status %s, %d bytes (%d seen before the kill); want interrupted with at least as much",
			reply.ID, reply.Status, len(reply.Content)+len(reply.Reasoning), seen)
	}
}
