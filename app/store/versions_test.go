package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// contents is the text of a branch's messages.
func contents(msgs []Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Content)
	}
	return out
}

func TestVersionsOfAnswersAndQuestions(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	c, q1, a1, err := s.AddTurn(ctx, Conversation{Title: "t"}, Message{Role: "user", Content: "q1"}, Message{Role: "assistant", Content: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	_, q2, a2, err := s.AddTurn(ctx, c, Message{Role: "user", Content: "q2"}, Message{Role: "assistant", Content: "a2"})
	if err != nil {
		t.Fatal(err)
	}
	// Regenerate: a second answer to q2.
	a2b, err := s.AddMessage(ctx, Message{ConversationID: c.ID, ParentID: q2.ID, Role: "assistant", Content: "a2b"})
	if err != nil {
		t.Fatal(err)
	}
	_, msgs, err := s.Conversation(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(msgs); !slices.Equal(got, []string{"q1", "a1", "q2", "a2b"}) {
		t.Fatalf("after regenerating, branch %q", got)
	}
	if !slices.Equal(msgs[3].Versions, []int64{a2.ID, a2b.ID}) || msgs[0].Versions != nil {
		t.Fatalf("versions %v and %v", msgs[3].Versions, msgs[0].Versions)
	}
	// Browse back to the first answer: the branch, and so the next turn's
	// context, is the first one again.
	if err := s.ShowVersion(ctx, a2.ID); err != nil {
		t.Fatal(err)
	}
	_, msgs, _ = s.Conversation(ctx, c.ID)
	if got := contents(msgs); !slices.Equal(got, []string{"q1", "a1", "q2", "a2"}) {
		t.Fatalf("after showing the first answer, branch %q", got)
	}
	// A question asked now follows the shown answer.
	if _, _, _, err := s.AddTurn(ctx, c, Message{Role: "user", Content: "q3"}, Message{Role: "assistant", Content: "a3"}); err != nil {
		t.Fatal(err)
	}
	// Edit the first question: a new branch from the start; the old one stays.
	e1, r1, err := s.AddQuestionVersion(ctx, q1.ID, Message{Content: "q1 edited"}, Message{Role: "assistant", Content: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	_, msgs, _ = s.Conversation(ctx, c.ID)
	if got := contents(msgs); !slices.Equal(got, []string{"q1 edited", "r1"}) {
		t.Fatalf("after editing the first question, branch %q", got)
	}
	if !slices.Equal(msgs[0].Versions, []int64{q1.ID, e1.ID}) || msgs[1].ID != r1.ID {
		t.Fatalf("versions of the first question %v", msgs[0].Versions)
	}
	// The earlier version still holds its whole branch, latest answers first.
	if err := s.ShowVersion(ctx, q1.ID); err != nil {
		t.Fatal(err)
	}
	_, msgs, _ = s.Conversation(ctx, c.ID)
	if got := contents(msgs); !slices.Equal(got, []string{"q1", "a1", "q2", "a2b"}) {
		t.Fatalf("back on the first question, branch %q", got)
	}
	// Continue deletes what follows a message on its branches only.
	if err := s.DeleteMessagesAfter(ctx, c.ID, a1.ID); err != nil {
		t.Fatal(err)
	}
	_, msgs, _ = s.Conversation(ctx, c.ID)
	if got := contents(msgs); !slices.Equal(got, []string{"q1", "a1"}) {
		t.Fatalf("after deleting what follows a1, branch %q", got)
	}
	if err := s.ShowVersion(ctx, e1.ID); err != nil {
		t.Fatal(err)
	}
	if _, msgs, _ = s.Conversation(ctx, c.ID); !slices.Equal(contents(msgs), []string{"q1 edited", "r1"}) {
		t.Fatalf("the other branch was lost: %q", contents(msgs))
	}
}

func TestEditKeepsDocuments(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	att := Attachment{Name: "a.csv", Size: 3, SHA256: "ab", Tokens: 2, Text: "x,y"}
	_, q, _, err := s.AddTurn(ctx, Conversation{Title: "t"}, Message{Role: "user", Content: "q", Attachments: []Attachment{att}}, Message{Role: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := s.AddQuestionVersion(ctx, q.ID, Message{Content: "q2"}, Message{Role: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	_, msgs, _ := s.Conversation(ctx, q.ConversationID)
	if msgs[0].ID != e.ID || len(msgs[0].Attachments) != 1 || msgs[0].Attachments[0] != att {
		t.Fatalf("edited question %+v", msgs[0])
	}
}

// A database of the schema before versions opens with each conversation
// as one branch, and takes versions at once.
func TestMigrationMakesOneBranch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	before := len(migrations) - 1
	for before > 0 && !containsParent(migrations[before]) {
		before--
	}
	if err := migrate(db, before); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO conversations (id, title, created_at, updated_at) VALUES (3, 'a', 1, 1), (4, 'b', 1, 1);
		INSERT INTO messages (id, conversation_id, role, content, status, created_at) VALUES
			(1, 3, 'user', 'q1', 'complete', 1), (2, 4, 'user', 'other', 'complete', 1),
			(3, 3, 'assistant', 'a1', 'complete', 2), (4, 3, 'user', 'q2', 'complete', 3), (5, 3, 'assistant', 'a2', 'complete', 4)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, msgs, err := s.Conversation(ctx, 3)
	if err != nil || !slices.Equal(contents(msgs), []string{"q1", "a1", "q2", "a2"}) {
		t.Fatalf("migrated branch %q, %v", contents(msgs), err)
	}
	if msgs[0].ParentID != 0 || msgs[1].ParentID != 1 || msgs[2].ParentID != 3 || msgs[3].ParentID != 4 {
		t.Fatalf("parents %+v", msgs)
	}
	if _, err := s.AddMessage(ctx, Message{ConversationID: 3, ParentID: 4, Role: "assistant", Content: "a2b"}); err != nil {
		t.Fatal(err)
	}
	_, msgs, _ = s.Conversation(ctx, 3)
	if !slices.Equal(contents(msgs), []string{"q1", "a1", "q2", "a2b"}) || len(msgs[3].Versions) != 2 {
		t.Fatalf("regenerated on a migrated database: %+v", msgs)
	}
	if _, msgs, _ = s.Conversation(ctx, 4); !slices.Equal(contents(msgs), []string{"other"}) {
		t.Fatalf("the other conversation reads %q", contents(msgs))
	}
}

// containsParent reports whether a migration adds the parent link.
func containsParent(migration string) bool {
	return strings.Contains(migration, "ADD COLUMN parent_id")
}

// Search reads every branch: an answer regenerated away (not shown) is
// found, and the hit names it so that the window can show its branch.
func TestSearchFindsHiddenBranches(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	c, q, a1, err := s.AddTurn(ctx, Conversation{Title: "t"}, Message{Role: "user", Content: "Name an animal"}, Message{Role: "assistant", Content: "A zebra, striped."})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, ParentID: q.ID, Role: "assistant", Content: "A heron."}); err != nil {
		t.Fatal(err)
	}
	_, shown, _ := s.Conversation(ctx, c.ID)
	if shown[1].Content != "A heron." {
		t.Fatalf("shown %q, want the regenerated answer", contents(shown))
	}
	list, err := s.Conversations(ctx, "ZEBRA")
	if err != nil || len(list) != 1 || list[0].ID != c.ID || list[0].MatchID != a1.ID || !strings.Contains(list[0].Snippet, "zebra") {
		t.Fatalf("search zebra: %+v, %v; want the conversation, its hidden answer %d", list, err, a1.ID)
	}
}
