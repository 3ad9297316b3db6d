package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/app/store"
)

// seedBranches stores a conversation with two answers to its question
// (the first one shown) and a document on the question, through the real
// store.
func seedBranches(t *testing.T, s *testService) (store.Conversation, []store.Message) {
	t.Helper()
	ctx := context.Background()
	att := store.Attachment{Name: "notes.txt", Size: 5, SHA256: "ab", Format: "txt", Tokens: 2, Text: "hello"}
	c, q, a1, err := s.store.AddTurn(ctx, store.Conversation{Title: "Paths / joins"},
		store.Message{Role: "user", Content: "What does os.path.join do?", Attachments: []store.Attachment{att}},
		store.Message{Role: "assistant", Content: "It joins **paths**.", Reasoning: "think", Stats: &store.Stats{Model: "Suzuran Tiny", ThinkingMS: 1200}})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := s.store.AddMessage(ctx, store.Message{ConversationID: c.ID, ParentID: q.ID, Role: "assistant", Content: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.ShowVersion(ctx, a1.ID); err != nil {
		t.Fatal(err)
	}
	c.Settings = store.ChatSettings{SystemPrompt: "Answer in French.", Thinking: store.ThinkingOff, SamplingPreset: PresetCoding}
	if err := s.store.SetConversationSettings(ctx, c.ID, c.Settings); err != nil {
		t.Fatal(err)
	}
	return c, []store.Message{q, a1, a2}
}

func TestExportImportRoundTrip(t *testing.T) {
	s := newTestService(t, tinyDir)
	c, msgs := seedBranches(t, s)
	md, err := s.ui.Export(c.ID, "markdown")
	if err != nil {
		t.Fatal(err)
	}
	if md.Name != "Paths joins.md" || !strings.Contains(md.Text, "# Paths / joins") ||
		!strings.Contains(md.Text, "It joins **paths**.") || strings.Contains(md.Text, "second") ||
		!strings.Contains(md.Text, "## Suzuran Tiny · ") || !strings.Contains(md.Text, "Attached: notes.txt") {
		t.Fatalf("markdown %q:\n%s", md.Name, md.Text)
	}
	js, err := s.ui.Export(c.ID, "json")
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid([]byte(js.Text)) || js.MIME != "application/json" {
		t.Fatalf("json export %q", js.Text)
	}
	imported, err := s.ui.Import(js.Text)
	if err != nil {
		t.Fatal(err)
	}
	if imported.ID == c.ID || imported.Title != c.Title || !strings.Contains(js.Text, `"systemPrompt": "Answer in French."`) {
		t.Fatalf("imported %+v", imported)
	}
	view, err := s.ui.Conversation(imported.ID)
	if err != nil {
		t.Fatal(err)
	}
	if view.Conversation.Settings != c.Settings {
		t.Errorf("imported settings %+v, want the conversation's own %+v", view.Conversation.Settings, c.Settings)
	}
	got := view.Messages
	if len(got) != 2 || got[0].Content != msgs[0].Content || got[1].Content != msgs[1].Content ||
		got[1].Reasoning != "think" || got[1].Stats == nil || got[1].Stats.ThinkingMS != 1200 ||
		len(got[1].Versions) != 2 || got[0].CreatedAt != msgs[0].CreatedAt {
		t.Fatalf("imported branch %+v", got)
	}
	// The document comes back with the text the model reads.
	if len(got[0].Attachments) != 1 || got[0].Attachments[0].Text != "hello" {
		t.Fatalf("imported attachments %+v", got[0].Attachments)
	}
	// The other version came too.
	view, err = s.ui.ShowVersion(got[1].Versions[1])
	if err != nil || view.Messages[1].Content != "second" {
		t.Fatalf("the other version: %+v, %v", view.Messages, err)
	}
}

func TestImportRefusesBadFilesAndStoresNothing(t *testing.T) {
	s := newTestService(t, tinyDir)
	c, _ := seedBranches(t, s)
	good, err := s.ui.Export(c.ID, "json")
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(map[string]any)) string {
		var m map[string]any
		json.Unmarshal([]byte(good.Text), &m)
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct{ name, text, want string }{
		{"truncated", good.Text[:len(good.Text)/2], "not valid JSON"},
		{"not json", "hello", "not valid JSON"},
		{"other format", `{"format":"chatgpt","version":1}`, "not a Suzuran conversation"},
		{"array", `[1,2]`, "not a Suzuran conversation"},
		{"newer", mutate(func(m map[string]any) { m["version"] = 9 }), "update Suzuran"},
		{"bad role", mutate(func(m map[string]any) {
			m["messages"].([]any)[1].(map[string]any)["role"] = "system"
		}), `role "system"`},
		{"bad settings", mutate(func(m map[string]any) {
			m["settings"].(map[string]any)["samplingPreset"] = "wild"
		}), `its settings: sampling preset "wild"`},
		{"orphan", mutate(func(m map[string]any) {
			m["messages"].([]any)[2].(map[string]any)["parentId"] = 999
		}), "does not come before it"},
	}
	before, _ := s.ui.Conversations("")
	for _, tc := range cases {
		_, err := s.ui.Import(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cannot be imported") {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	after, _ := s.ui.Conversations("")
	if len(after) != len(before) {
		t.Fatalf("%d conversations after refused imports, %d before", len(after), len(before))
	}
	// A file from before conversations had settings follows the app's.
	old, err := s.ui.Import(mutate(func(m map[string]any) { delete(m, "settings") }))
	if err != nil || old.Settings != (store.ChatSettings{}) {
		t.Errorf("a file without settings: %+v, %v", old.Settings, err)
	}
	if _, err := s.ui.Export(c.ID, "pdf"); err == nil {
		t.Error("an unknown export format was accepted")
	}
	if r, err := s.ui.SaveExport(c.ID, "json"); err != nil || r.Dialog {
		t.Errorf("SaveExport without a dialog: %+v, %v", r, err)
	}
}
