package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "sub", "suzuran.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenUsesWALAndCurrentSchema(t *testing.T) {
	s := openTemp(t)
	var mode string
	var version int
	if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || version != len(migrations) {
		t.Fatalf("journal_mode %q, user_version %d; want wal, %d", mode, version, len(migrations))
	}
	if err := s.IntegrityCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConversationLifecycle(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	c, err := s.CreateConversation(ctx, "What does json.dumps do?")
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: "What does json.dumps do?"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "assistant", Status: StatusStreaming})
	if err != nil {
		t.Fatal(err)
	}
	a.Content, a.Reasoning, a.Status = "It serialises an object to a JSON string.", "short", StatusComplete
	a.Stats = &Stats{PromptTokens: 12, GeneratedTokens: 9, TokensPerSecond: 41.5, FinishReason: "stop"}
	if err := s.UpdateMessage(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, msgs, err := s.Conversation(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != c.Title || len(msgs) != 2 || msgs[0].ID != q.ID || msgs[1].Content != a.Content ||
		msgs[1].Stats == nil || *msgs[1].Stats != *a.Stats || msgs[1].Reasoning != "short" {
		t.Fatalf("read back %+v %+v", got, msgs)
	}

	if err := s.RenameConversation(ctx, c.ID, "  JSON  "); err != nil {
		t.Fatal(err)
	}
	if err := s.RenameConversation(ctx, c.ID, " "); err == nil {
		t.Error("an empty title was accepted")
	}
	if err := s.DeleteMessagesAfter(ctx, c.ID, q.ID); err != nil {
		t.Fatal(err)
	}
	if _, msgs, _ = s.Conversation(ctx, c.ID); len(msgs) != 1 {
		t.Fatalf("%d messages after deleting those after the question, want 1", len(msgs))
	}

	if err := s.DeleteConversation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.Conversations(ctx, ""); len(list) != 0 {
		t.Fatalf("deleted conversation still listed: %+v", list)
	}
	if _, _, err := s.Conversation(ctx, c.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("reading a deleted conversation: %v, want ErrNotFound", err)
	}
	if err := s.RestoreConversation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	list, _ := s.Conversations(ctx, "")
	if len(list) != 1 || list[0].Title != "JSON" {
		t.Fatalf("after undo: %+v", list)
	}
	if err := s.RestoreConversation(ctx, c.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("restoring a conversation that is not deleted: %v, want ErrNotFound", err)
	}
}

func TestSearch(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	add := func(title string, texts ...string) int64 {
		c, err := s.CreateConversation(ctx, title)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range texts {
			if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: text}); err != nil {
				t.Fatal(err)
			}
		}
		return c.ID
	}
	pairwise := add("itertools", "What does itertools.pairwise do?")
	json := add("Serialising", "What does json.dumps do?", "And JSON.loads, 100% sure?")
	add("Other", "Nothing here")

	cases := []struct {
		query string
		want  []int64
	}{
		{"", nil}, // all three
		{"PAIRWISE", []int64{pairwise}},
		{"serial", []int64{json}},
		{"json", []int64{json}},
		{"100%", []int64{json}},
		{"%", []int64{json}}, // a literal percent sign, not a wildcard
		{"_", nil},
		{"absent", []int64{}},
	}
	for _, c := range cases {
		list, err := s.Conversations(ctx, c.query)
		if err != nil {
			t.Fatal(err)
		}
		if c.query == "" {
			if len(list) != 3 {
				t.Errorf("no query: %d conversations, want 3", len(list))
			}
			continue
		}
		var ids []int64
		for _, x := range list {
			ids = append(ids, x.ID)
		}
		if c.want == nil {
			c.want = []int64{}
		}
		if len(ids) != len(c.want) || (len(ids) > 0 && ids[0] != c.want[0]) {
			t.Errorf("search %q: %v, want %v", c.query, ids, c.want)
		}
	}
	list, _ := s.Conversations(ctx, "loads")
	if len(list) != 1 || !strings.Contains(list[0].Snippet, "JSON.loads") {
		t.Errorf("snippet for loads: %+v", list)
	}
}

func TestOpenMarksStreamingInterruptedAndDropsDeleted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "suzuran.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	keep, _ := s.CreateConversation(ctx, "keep")
	gone, _ := s.CreateConversation(ctx, "gone")
	m, _ := s.AddMessage(ctx, Message{ConversationID: keep.ID, Role: "assistant", Content: "half an ans", Status: StatusStreaming})
	if err := s.DeleteConversation(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Message(ctx, m.ID)
	if err != nil || got.Status != StatusInterrupted || got.Content != "half an ans" {
		t.Fatalf("after reopening: %+v, %v; want the partial reply marked interrupted", got, err)
	}
	if err := s.RestoreConversation(ctx, gone.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a conversation deleted before a restart came back: %v", err)
	}
}

// seeds write, into a database at schema version v (index), the rows that
// version could hold; the test then opens it with the current code.
var seeds = []func(db *sql.DB) error{
	0: func(db *sql.DB) error { return nil },
	1: func(db *sql.DB) error {
		_, err := db.Exec(`INSERT INTO conversations (id, title, created_at, updated_at) VALUES (7, 'old', 1, 2);
			INSERT INTO messages (conversation_id, role, content, reasoning, status, stats, created_at)
			VALUES (7, 'user', 'hello from v1', '', 'complete', NULL, 1),
			       (7, 'assistant', 'half', 'hmm', 'streaming', NULL, 2)`)
		return err
	},
	2: func(db *sql.DB) error {
		_, err := db.Exec(`INSERT INTO conversations (id, title, created_at, updated_at) VALUES (7, 'old', 1, 2);
			INSERT INTO messages (conversation_id, role, content, reasoning, status, stats, created_at, error)
			VALUES (7, 'user', 'hello from v1', '', 'complete', NULL, 1, ''),
			       (7, 'assistant', 'half', 'hmm', 'streaming', NULL, 2, '')`)
		return err
	}, 3: func(db *sql.DB) error {
		_, err := db.Exec(`INSERT INTO conversations (id, title, created_at, updated_at) VALUES (7, 'old', 1, 2);
			INSERT INTO messages (conversation_id, role, content, reasoning, status, stats, created_at, error)
			VALUES (7, 'user', 'hello from v1', '', 'complete', NULL, 1, ''),
			       (7, 'assistant', 'half', 'hmm', 'streaming', NULL, 2, '')`)
		return err
	},
	4: func(db *sql.DB) error {
		_, err := db.Exec(`INSERT INTO conversations (id, title, created_at, updated_at, leaf_id) VALUES (7, 'old', 1, 2, 2);
			INSERT INTO messages (id, conversation_id, role, content, reasoning, status, stats, created_at, error, parent_id)
			VALUES (1, 7, 'user', 'hello from v1', '', 'complete', NULL, 1, '', NULL),
			       (2, 7, 'assistant', 'half', 'hmm', 'streaming', NULL, 2, '', 1)`)
		return err
	},
}

func TestMigrationsFromEveryVersion(t *testing.T) {
	if len(seeds) != len(migrations) {
		t.Fatalf("%d seeds for %d schema versions: add a seed for each new migration", len(seeds), len(migrations))
	}
	ctx := context.Background()
	for from := range len(migrations) {
		path := filepath.Join(t.TempDir(), "old.db")
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		if err := migrate(db, from); err != nil {
			t.Fatalf("building version %d: %v", from, err)
		}
		if err := seeds[from](db); err != nil {
			t.Fatalf("seeding version %d: %v", from, err)
		}
		db.Close()

		s, err := Open(path)
		if err != nil {
			t.Fatalf("opening a version %d database: %v", from, err)
		}
		if err := s.IntegrityCheck(ctx); err != nil {
			t.Errorf("from version %d: %v", from, err)
		}
		if from >= 1 {
			_, msgs, err := s.Conversation(ctx, 7)
			if err != nil || len(msgs) != 2 || msgs[0].Content != "hello from v1" || msgs[1].Status != StatusInterrupted {
				t.Errorf("from version %d: %+v, %v", from, msgs, err)
			}
			// An older conversation follows the app's settings, and can
			// take its own.
			c, _, err := s.Conversation(ctx, 7)
			if err != nil || c.Settings != (ChatSettings{}) {
				t.Errorf("from version %d: settings %+v, %v; want none of its own", from, c.Settings, err)
			}
			own := ChatSettings{SystemPrompt: "Be brief.", Thinking: ThinkingOff, SamplingPreset: "coding"}
			if err := s.SetConversationSettings(ctx, 7, own); err != nil {
				t.Errorf("from version %d: %v", from, err)
			} else if c, _, _ := s.Conversation(ctx, 7); c.Settings != own {
				t.Errorf("from version %d: settings read back as %+v, want %+v", from, c.Settings, own)
			}
		}
		// The current schema works on the migrated file.
		c, err := s.CreateConversation(ctx, "new")
		if err == nil {
			_, err = s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "assistant", Status: StatusError, Error: "boom"})
		}
		if err == nil {
			att := Attachment{Name: "a.csv", Size: 3, SHA256: "ab", Tokens: 2, Text: "x,y"}
			_, err = s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: "q", Attachments: []Attachment{att}})
			if err == nil {
				var msgs []Message
				_, msgs, err = s.Conversation(ctx, c.ID)
				if err == nil && (len(msgs) != 2 || len(msgs[1].Attachments) != 1 || msgs[1].Attachments[0] != att) {
					t.Errorf("from version %d: attachment read back as %+v", from, msgs)
				}
			}
		}
		if err == nil {
			err = s.DeleteConversation(ctx, c.ID)
		}
		if err != nil {
			t.Errorf("from version %d: using the migrated database: %v", from, err)
		}
		s.Close()
	}
}

func TestConversationSettings(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "suzuran.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateConversation(ctx, "settings")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := s.CreateConversation(ctx, "other")
	if got, _, _ := s.Conversation(ctx, c.ID); got.Settings != (ChatSettings{}) {
		t.Fatalf("a new conversation has settings %+v, want none of its own", got.Settings)
	}
	own := ChatSettings{SystemPrompt: "Answer in French.", Thinking: ThinkingOn, SamplingPreset: "coding"}
	if err := s.SetConversationSettings(ctx, c.ID, own); err != nil {
		t.Fatal(err)
	}
	err = s.SetConversationSettings(ctx, c.ID, ChatSettings{Thinking: "maybe"})
	if err == nil || !strings.Contains(err.Error(), `thinking "maybe"`) {
		t.Errorf("thinking maybe: %v, want a refusal naming it", err)
	}
	if err := s.SetConversationSettings(ctx, 9999, own); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown conversation: %v, want ErrNotFound", err)
	}
	s.Close()

	// Kept across a restart, per conversation, in the list as well.
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _, _ := s.Conversation(ctx, c.ID); got.Settings != own {
		t.Errorf("after reopening: %+v, want %+v", got.Settings, own)
	}
	if got, _, _ := s.Conversation(ctx, other.ID); got.Settings != (ChatSettings{}) {
		t.Errorf("the other conversation took settings %+v", got.Settings)
	}
	list, _ := s.Conversations(ctx, "")
	for _, x := range list {
		if x.ID == c.ID && x.Settings != own {
			t.Errorf("listed with %+v, want %+v", x.Settings, own)
		}
	}
	// Back to the app's.
	if err := s.SetConversationSettings(ctx, c.ID, ChatSettings{}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Conversation(ctx, c.ID); got.Settings != (ChatSettings{}) {
		t.Errorf("cleared: %+v", got.Settings)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	db, _ := sql.Open("sqlite", "file:"+path)
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "update Suzuran") {
		t.Fatalf("opening a newer database: %v", err)
	}
}

func TestTitleFrom(t *testing.T) {
	cases := []struct{ in, want string }{
		{"What does json.dumps do?", "What does json.dumps do?"},
		{"  first line\nsecond line", "first line"},
		{"   ", "New chat"},
		{"Explain how the garbage collector of CPython finds reference cycles in detail",
			"Explain how the garbage collector of CPython…"},
	}
	for _, c := range cases {
		if got := TitleFrom(c.in); got != c.want {
			t.Errorf("TitleFrom(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAttachmentsRoundTripAndCascade(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.CreateConversation(ctx, "docs")
	if err != nil {
		t.Fatal(err)
	}
	want := []Attachment{
		{Name: "report.pdf", Size: 12230, SHA256: "00ff", Format: "pdf", Type: "PDF document", Pages: 2, PageUnit: "pages",
			Tokens: 900, Text: "page one\fpage two", Kept: "end", OriginalTokens: 4000},
		{Name: "表.csv", Size: 9, SHA256: "11ee", Format: "csv", Type: "CSV table", Tokens: 5, Text: "| a | b |"},
	}
	q, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: "compare", Attachments: want})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "assistant", Content: "ok"}); err != nil {
		t.Fatal(err)
	}
	_, msgs, err := s.Conversation(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || len(msgs[0].Attachments) != 2 || msgs[0].Attachments[0] != want[0] || msgs[0].Attachments[1] != want[1] ||
		len(msgs[1].Attachments) != 0 {
		t.Fatalf("read back %+v", msgs)
	}
	// Removing the question removes its documents.
	if _, err := s.db.Exec("DELETE FROM messages WHERE id = ?", q.ID); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM attachments").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d attachments left after their message was deleted (%v)", n, err)
	}
}
