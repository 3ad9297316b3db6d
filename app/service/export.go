package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/suzuran-app/suzuran/app/store"
)

// exportFormat names Suzuran's conversation files; exportVersion is their
// layout, raised when it changes.
const (
	exportFormat  = "suzuran.conversation"
	exportVersion = 1
)

// ExportedConversation is a conversation as a JSON file: every message on
// every branch (an answer regenerated, a question edited), parents first.
type ExportedConversation struct {
	Format    string `json:"format"`
	Version   int    `json:"version"`
	Title     string `json:"title"`
	CreatedAt int64  `json:"createdAt"`
	// Shown is the id of the last message of the branch shown.
	Shown int64 `json:"shown"`
	// Settings are the conversation's own (absent in files of versions
	// before they were kept, which follow the app's).
	Settings *store.ChatSettings `json:"settings,omitempty"`
	Messages []ExportedMessage   `json:"messages"`
}

// ExportedMessage is one message of an exported conversation; ParentID
// names an earlier message of the file (0: a first question).
type ExportedMessage struct {
	ID          int64                `json:"id"`
	ParentID    int64                `json:"parentId,omitempty"`
	Role        string               `json:"role"`
	Content     string               `json:"content"`
	Reasoning   string               `json:"reasoning,omitempty"`
	Status      string               `json:"status"`
	Error       string               `json:"error,omitempty"`
	Stats       *store.Stats         `json:"stats,omitempty"`
	CreatedAt   int64                `json:"createdAt"`
	Attachments []ExportedAttachment `json:"attachments,omitempty"`
}

// ExportedAttachment is a document of a question, with the text the model
// read, so that an imported conversation sends it again.
type ExportedAttachment struct {
	store.Attachment
	Text string `json:"text"`
}

// ExportFile is an exported conversation: a file name, its type and text.
type ExportFile struct {
	Name string `json:"name"`
	MIME string `json:"mime"`
	Text string `json:"text"`
}

// Export writes a conversation as "markdown" (the branch shown, to read)
// or "json" (every version, to import again).
func (u *UI) Export(conversationID int64, format string) (ExportFile, error) {
	ctx := context.Background()
	c, shown, err := u.s.store.Conversation(ctx, conversationID)
	if err != nil {
		return ExportFile{}, err
	}
	base := fileName(c.Title)
	switch format {
	case "markdown":
		return ExportFile{Name: base + ".md", MIME: "text/markdown", Text: exportMarkdown(c, shown)}, nil
	case "json":
		all, leaf, err := u.s.store.AllMessages(ctx, conversationID)
		if err != nil {
			return ExportFile{}, err
		}
		out := ExportedConversation{Format: exportFormat, Version: exportVersion, Title: c.Title, CreatedAt: c.CreatedAt,
			Shown: leaf, Messages: []ExportedMessage{}}
		if c.Settings != (store.ChatSettings{}) {
			cs := c.Settings
			out.Settings = &cs
		}
		for _, m := range all {
			em := ExportedMessage{ID: m.ID, ParentID: m.ParentID, Role: m.Role, Content: m.Content, Reasoning: m.Reasoning,
				Status: m.Status, Error: m.Error, Stats: m.Stats, CreatedAt: m.CreatedAt}
			for _, a := range m.Attachments {
				em.Attachments = append(em.Attachments, ExportedAttachment{Attachment: a, Text: a.Text})
			}
			out.Messages = append(out.Messages, em)
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return ExportFile{}, err
		}
		return ExportFile{Name: base + ".json", MIME: "application/json", Text: string(b) + "\n"}, nil
	}
	return ExportFile{}, fmt.Errorf("export as %q: choose markdown or json", format)
}

func exportMarkdown(c store.Conversation, msgs []store.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", c.Title)
	for _, m := range msgs {
		when := time.UnixMilli(m.CreatedAt).UTC().Format("2006-01-02 15:04 UTC")
		if m.Role == "user" {
			fmt.Fprintf(&b, "## You · %s\n\n", when)
			for _, a := range m.Attachments {
				fmt.Fprintf(&b, "- Attached: %s\n", a.Name)
			}
			if len(m.Attachments) > 0 {
				b.WriteString("\n")
			}
		} else {
			who := "Answer"
			if m.Stats != nil && m.Stats.Model != "" {
				who = m.Stats.Model
			}
			fmt.Fprintf(&b, "## %s · %s\n\n", who, when)
			if r := strings.TrimSpace(m.Reasoning); r != "" {
				b.WriteString("<details><summary>Thoughts</summary>\n\n")
				b.WriteString(r)
				b.WriteString("\n\n</details>\n\n")
			}
		}
		b.WriteString(strings.TrimSpace(m.Content))
		b.WriteString("\n\n")
	}
	return b.String()
}

// fileName makes a file name from a title: no path separators or
// characters the file systems refuse, about 60 characters at most.
func fileName(title string) string {
	name := strings.Map(func(r rune) rune {
		if strings.ContainsRune(`/\:*?"<>|`, r) || r < ' ' {
			return ' '
		}
		return r
	}, title)
	name = strings.Join(strings.Fields(strings.TrimSuffix(name, "…")), " ")
	if utf8.RuneCountInString(name) > 60 {
		name = string([]rune(name)[:60])
	}
	name = strings.Trim(name, " .")
	if name == "" {
		name = "Conversation"
	}
	return name
}

// Import stores a conversation from the JSON of Export as a new
// conversation. A file that is not one is refused, with what is wrong,
// and nothing is stored.
func (u *UI) Import(text string) (store.Conversation, error) {
	in, err := parseExport(text)
	if err != nil {
		return store.Conversation{}, fmt.Errorf("this file cannot be imported: %w", err)
	}
	msgs := make([]store.Message, 0, len(in.Messages))
	for _, m := range in.Messages {
		sm := store.Message{ID: m.ID, ParentID: m.ParentID, Role: m.Role, Content: m.Content, Reasoning: m.Reasoning,
			Status: m.Status, Error: m.Error, Stats: m.Stats, CreatedAt: m.CreatedAt}
		for _, a := range m.Attachments {
			a.Attachment.Text = a.Text
			sm.Attachments = append(sm.Attachments, a.Attachment)
		}
		msgs = append(msgs, sm)
	}
	var settings store.ChatSettings
	if in.Settings != nil {
		settings = *in.Settings
	}
	c, err := u.s.store.ImportConversation(context.Background(), in.Title, in.CreatedAt, settings, msgs, in.Shown)
	if err != nil {
		return c, fmt.Errorf("the conversation could not be imported: %w", err)
	}
	u.s.events.publish(Event{Type: EventConversations})
	return c, nil
}

// parseExport reads and checks an exported conversation.
func parseExport(text string) (ExportedConversation, error) {
	var in ExportedConversation
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&in); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return in, fmt.Errorf("it is not valid JSON (at byte %d: %v): choose a file made by Export as JSON", syn.Offset, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return in, errors.New("it is not valid JSON (it ends too soon; was it cut short?): choose a whole file made by Export as JSON")
		}
		return in, fmt.Errorf("it is not a Suzuran conversation (%v): choose a file made by Export as JSON", err)
	}
	if in.Format != exportFormat {
		return in, fmt.Errorf("it is not a Suzuran conversation (its \"format\" is %q, want %q): choose a file made by Export as JSON", in.Format, exportFormat)
	}
	if in.Version < 1 || in.Version > exportVersion {
		return in, fmt.Errorf("it has layout version %d and this Suzuran reads version %d: update Suzuran", in.Version, exportVersion)
	}
	in.Title = strings.TrimSpace(in.Title)
	if in.Title == "" {
		in.Title = "Imported chat"
	}
	if in.Settings != nil {
		if err := checkChatSettings(*in.Settings); err != nil {
			return in, fmt.Errorf("its settings: %w", err)
		}
	}
	seen := map[int64]bool{}
	statuses := map[string]bool{store.StatusComplete: true, store.StatusStreaming: true, store.StatusStopped: true,
		store.StatusInterrupted: true, store.StatusError: true}
	for i, m := range in.Messages {
		n := i + 1
		if m.ID <= 0 || seen[m.ID] {
			return in, fmt.Errorf("message %d has id %d, which is missing or used twice", n, m.ID)
		}
		if m.Role != "user" && m.Role != "assistant" {
			return in, fmt.Errorf("message %d has role %q: want user or assistant", n, m.Role)
		}
		if m.ParentID != 0 && !seen[m.ParentID] {
			return in, fmt.Errorf("message %d follows message %d, which does not come before it", n, m.ParentID)
		}
		if m.Status == "" {
			in.Messages[i].Status = store.StatusComplete
		} else if !statuses[m.Status] {
			return in, fmt.Errorf("message %d has status %q", n, m.Status)
		}
		seen[m.ID] = true
	}
	if in.Shown != 0 && !seen[in.Shown] {
		return in, fmt.Errorf("its shown message %d is not among its messages", in.Shown)
	}
	return in, nil
}

// SetSavePicker gives the service the desktop's save dialog (Wails'
// SaveFileDialog); a browser has none and downloads the file instead.
func (s *Service) SetSavePicker(pick func(name string) (string, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pickSave = pick
}

// SaveExport exports a conversation (as Export) into a file chosen with
// the desktop's save dialog and returns its path, "" when cancelled. In a
// browser, which has no dialog, it returns ok false: download the file of
// Export instead.
func (u *UI) SaveExport(conversationID int64, format string) (SaveResult, error) {
	u.s.mu.Lock()
	pick := u.s.pickSave
	u.s.mu.Unlock()
	if pick == nil {
		return SaveResult{}, nil
	}
	f, err := u.Export(conversationID, format)
	if err != nil {
		return SaveResult{}, err
	}
	path, err := pick(f.Name)
	if err != nil || path == "" {
		return SaveResult{Dialog: true}, err
	}
	if err := os.WriteFile(path, []byte(f.Text), 0o644); err != nil {
		return SaveResult{Dialog: true}, fmt.Errorf("the conversation could not be saved: %w", err)
	}
	return SaveResult{Dialog: true, Path: path}, nil
}

// SaveResult says where SaveExport wrote the file: Dialog is false where
// there is no save dialog (a browser), Path "" when the user cancelled.
type SaveResult struct {
	Dialog bool   `json:"dialog"`
	Path   string `json:"path"`
}
