package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/store"
)

// UI is every call the chat window makes. Its exported methods are the
// whole surface: Wails binds them for the desktop window, the HTTP
// transport (http.go) serves them at /api/call/<Method> for a browser, and
// frontend/src/lib/gen/service.ts gives them their TypeScript types
// (written by ./gen from these very methods).
type UI struct{ s *Service }

// AppState is what the window needs when it opens.
type AppState struct {
	Version  string               `json:"version"`
	Model    modelhost.ModelState `json:"model"`
	API      APIState             `json:"api"`
	Settings Settings             `json:"settings"`
	// ShowWelcome asks the window to open the welcome view by itself: the
	// first run, on the demo model, before the view was ever dismissed.
	ShowWelcome bool `json:"showWelcome"`
	// Shortcut is the global shortcut's availability (macOS's desktop app)
	// and why the saved one could not be taken.
	Shortcut ShortcutState `json:"shortcut"`
}

// ConversationView is a conversation with its messages.
type ConversationView struct {
	Conversation store.Conversation `json:"conversation"`
	Messages     []store.Message    `json:"messages"`
}

// SendRequest is a message typed in the window.
type SendRequest struct {
	// ConversationID is the conversation to add to; 0 starts a new one.
	ConversationID int64  `json:"conversationId"`
	Text           string `json:"text"`
	Think          bool   `json:"think"`
	// Attachments are the ids of attached documents (AttachmentView.ID),
	// all read; Keep ("beginning" or "end") cuts them when they do not
	// fit the context. Without Keep, documents that do not fit are refused
	// with the numbers: never cut without the user's choice.
	Attachments []string `json:"attachments,omitempty"`
	Keep        string   `json:"keep,omitempty"`
}

// SendResult is what Send and Edit add: the question and the reply that
// is being written (status "streaming"; its text arrives as events).
type SendResult struct {
	Conversation store.Conversation `json:"conversation"`
	Question     store.Message      `json:"question"`
	Reply        store.Message      `json:"reply"`
}

// State returns the app's version and the state of the model, the API and
// the settings.
func (u *UI) State() AppState {
	return AppState{Version: u.s.version, Model: u.s.ModelState(), API: u.s.APIState(), Settings: u.s.Settings(),
		ShowWelcome: u.s.showWelcome(), Shortcut: u.s.shortcutState()}
}

// Conversations lists the conversations, the latest first; a non-empty
// query keeps those whose title or text contains it.
func (u *UI) Conversations(query string) ([]store.Conversation, error) {
	return u.s.store.Conversations(context.Background(), query)
}

// Conversation returns one conversation and its messages; a reply being
// written is returned with its text so far.
func (u *UI) Conversation(id int64) (ConversationView, error) {
	c, msgs, err := u.s.store.Conversation(context.Background(), id)
	return ConversationView{Conversation: c, Messages: u.s.withLive(msgs)}, err
}

// SetConversationSettings stores a conversation's own system prompt,
// thinking and sampling preset ("" follows the app's Settings) and
// returns the conversation with them. Its next turns use them.
func (u *UI) SetConversationSettings(id int64, settings store.ChatSettings) (store.Conversation, error) {
	ctx := context.Background()
	if err := checkChatSettings(settings); err != nil {
		return store.Conversation{}, err
	}
	if err := u.s.store.SetConversationSettings(ctx, id, settings); err != nil {
		return store.Conversation{}, err
	}
	c, _, err := u.s.store.Conversation(ctx, id)
	if err != nil {
		return c, err
	}
	u.s.events.publish(Event{Type: EventConversations})
	return c, nil
}

// Rename sets a conversation's title.
func (u *UI) Rename(id int64, title string) error {
	if err := u.s.store.RenameConversation(context.Background(), id, title); err != nil {
		return err
	}
	u.s.events.publish(Event{Type: EventConversations})
	return nil
}

// Delete removes a conversation (stopping its reply); Undelete brings it
// back until the app quits.
func (u *UI) Delete(id int64) error {
	u.s.stopAndWait(id)
	if err := u.s.store.DeleteConversation(context.Background(), id); err != nil {
		return err
	}
	if u.s.prefix != nil {
		u.s.prefix.DeleteOwner(prefixOwner(id))
	}
	u.s.events.publish(Event{Type: EventConversations})
	return nil
}

// Undelete undoes Delete.
func (u *UI) Undelete(id int64) error {
	if err := u.s.store.RestoreConversation(context.Background(), id); err != nil {
		return err
	}
	u.s.events.publish(Event{Type: EventConversations})
	return nil
}

// Send adds a question to a conversation (a new one when its id is 0) and
// starts the reply.
func (u *UI) Send(req SendRequest) (SendResult, error) {
	ctx := context.Background()
	text := strings.TrimSpace(req.Text)
	if text == "" {
		return SendResult{}, errors.New("the message is empty: type a question first")
	}
	// Documents are checked against the context first: a refusal adds
	// nothing to the conversation.
	atts, err := u.s.prepareAttachments(ctx, req.ConversationID, text, req.Think, req.Attachments, req.Keep)
	if err != nil {
		return SendResult{}, err
	}
	if len(req.Attachments) == 0 {
		if err := u.s.checkQuestion(req.ConversationID, text, req.Think); err != nil {
			return SendResult{}, err
		}
	}
	c := store.Conversation{Title: store.TitleFrom(text)}
	if req.ConversationID != 0 {
		c, _, err = u.s.store.Conversation(ctx, req.ConversationID)
		if err == nil && u.s.busy(c.ID) {
			err = fmt.Errorf("a reply is still being written in %q: stop it first", c.Title)
		}
		if err != nil {
			return SendResult{}, err
		}
	}
	// The question and its reply are stored together: on a full disk
	// nothing is, and the question stays in the box to send again.
	c, q, reply, err := u.s.store.AddTurn(ctx, c, store.Message{Role: "user", Content: text, Attachments: atts},
		store.Message{Role: "assistant", Status: store.StatusStreaming})
	if err != nil {
		return SendResult{}, fmt.Errorf("the question could not be saved, and was not sent: %w", err)
	}
	u.s.dropAttachments(req.Attachments)
	u.s.startReply(reply, req.Think)
	u.s.events.publish(Event{Type: EventConversations})
	return SendResult{Conversation: c, Question: q, Reply: reply}, nil
}

// Stop ends the reply being written in a conversation within one token;
// it is kept, marked stopped.
func (u *UI) Stop(conversationID int64) {
	u.s.stopAndWait(conversationID)
}

// Regenerate answers a conversation's last question again. The earlier
// answers stay, as versions of this one (ShowVersion).
func (u *UI) Regenerate(conversationID int64, think bool) (store.Message, error) {
	ctx := context.Background()
	u.s.stopAndWait(conversationID)
	_, msgs, err := u.s.store.Conversation(ctx, conversationID)
	if err != nil {
		return store.Message{}, err
	}
	last := lastQuestion(msgs)
	if last == nil {
		return store.Message{}, errors.New("this conversation has no question to answer again")
	}
	reply, err := u.s.store.AddMessage(ctx, store.Message{
		ConversationID: conversationID, ParentID: last.ID, Role: "assistant", Status: store.StatusStreaming,
	})
	if err != nil {
		return reply, err
	}
	u.s.startReply(reply, think)
	return reply, nil
}

// ShowVersion shows the version of a message with this id (an answer
// regenerated, a question edited), and what follows it: the conversation
// goes on from that branch. It is refused while a reply is written.
func (u *UI) ShowVersion(messageID int64) (ConversationView, error) {
	ctx := context.Background()
	m, err := u.s.store.Message(ctx, messageID)
	if err != nil {
		return ConversationView{}, err
	}
	if u.s.busy(m.ConversationID) {
		return ConversationView{}, errors.New("a reply is still being written: stop it first, then look at the other versions")
	}
	if err := u.s.store.ShowVersion(ctx, messageID); err != nil {
		return ConversationView{}, err
	}
	return u.Conversation(m.ConversationID)
}

// Edit asks a question again with new text, as another version of it:
// the earlier version and its answers stay (ShowVersion).
func (u *UI) Edit(messageID int64, text string, think bool) (SendResult, error) {
	ctx := context.Background()
	text = strings.TrimSpace(text)
	if text == "" {
		return SendResult{}, errors.New("the message is empty: type a question first")
	}
	q, err := u.s.store.Message(ctx, messageID)
	if err != nil {
		return SendResult{}, err
	}
	if q.Role != "user" {
		return SendResult{}, fmt.Errorf("message %d is a reply: only questions can be edited", messageID)
	}
	u.s.stopAndWait(q.ConversationID)
	c, _, err := u.s.store.Conversation(ctx, q.ConversationID)
	if err != nil {
		return SendResult{}, err
	}
	q, reply, err := u.s.store.AddQuestionVersion(ctx, messageID, store.Message{Content: text},
		store.Message{Role: "assistant", Status: store.StatusStreaming})
	if err != nil {
		return SendResult{}, err
	}
	u.s.startReply(reply, think)
	return SendResult{Conversation: c, Question: q, Reply: reply}, nil
}

// Continue goes on with a reply that was stopped or interrupted, from
// where its text ends.
func (u *UI) Continue(messageID int64) (store.Message, error) {
	ctx := context.Background()
	m, err := u.s.store.Message(ctx, messageID)
	if err != nil {
		return m, err
	}
	if m.Role != "assistant" || (m.Status != store.StatusInterrupted && m.Status != store.StatusStopped) {
		return m, fmt.Errorf("message %d is not a stopped or interrupted reply", messageID)
	}
	u.s.stopAndWait(m.ConversationID)
	if err := u.s.store.DeleteMessagesAfter(ctx, m.ConversationID, m.ID); err != nil {
		return m, err
	}
	think := m.Reasoning != ""
	m.Status, m.Error, m.Stats = store.StatusStreaming, "", nil
	if err := u.s.store.UpdateMessage(ctx, m); err != nil {
		return m, err
	}
	u.s.events.publish(Event{Type: EventMessage, ConversationID: m.ConversationID, MessageID: m.ID, Message: &m})
	u.s.start(m, think, true)
	return m, nil
}

// Settings returns the settings.
func (u *UI) Settings() Settings { return u.s.Settings() }

// SaveSettings validates and stores settings and returns them as saved (a
// key generated when the API was exposed to the network).
func (u *UI) SaveSettings(s Settings) (Settings, error) { return u.s.SaveSettings(s) }

// SetAPIEnabled switches the local API on or off.
func (u *UI) SetAPIEnabled(on bool) (APIState, error) { return u.s.SetAPIEnabled(on) }

// ReloadModel loads the model again (after an error, for instance).
func (u *UI) ReloadModel() error { return u.s.LoadModel("") }

// RecheckGPU runs the GPU self-check again, whatever result is remembered,
// and loads the model where it says: on the GPU if it passes, else on the
// CPU (Settings' "Check the GPU again").
func (u *UI) RecheckGPU() error { return u.s.RecheckGPU() }

// Report is the report of `suzuran doctor --json`, which the window's
// "Copy report" puts on the clipboard. It takes seconds.
func (u *UI) Report() (string, error) { return u.s.Report() }

// startReply announces a stored empty reply and starts writing it.
func (s *Service) startReply(reply store.Message, think bool) {
	m := reply
	s.events.publish(Event{Type: EventMessage, ConversationID: reply.ConversationID, MessageID: reply.ID, Message: &m})
	s.start(reply, think, false)
}

func (s *Service) busy(conversation int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[conversation] != nil
}

func lastQuestion(msgs []store.Message) *store.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return &msgs[i]
		}
	}
	return nil
}
