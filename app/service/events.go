package service

import (
	"sync"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/store"
)

// Event types.
const (
	// EventReply carries a reply's new text (Content and Reasoning are
	// what was added since the last event, about 30 ms of tokens).
	EventReply = "reply"
	// EventPrefill says how far the model has read a prompt of
	// PromptTokens tokens (PromptDone, cached ones included) before its
	// first token: once after the prefix cache lookup and after each
	// prefill chunk.
	EventPrefill = "prefill"
	// EventMessage carries a whole message: a reply starting or ending, or
	// a question added.
	EventMessage = "message"
	// EventConversations says the list of conversations changed.
	EventConversations = "conversations"
	// EventModel carries the model's new state.
	EventModel = "model"
	// EventAPI carries the local API's new state.
	EventAPI = "api"
	// EventSettings carries the settings after a change.
	EventSettings = "settings"
	// EventDownload carries the model download's new state.
	EventDownload = "download"
	// EventAttachment carries an attachment's progress and its end (ready
	// with its token count, or failed with the reason).
	EventAttachment = "attachment"
)

// Event is what the service tells the windows: over Wails events in the
// desktop window, over server-sent events in a browser.
type Event struct {
	Type           string `json:"type"`
	ConversationID int64  `json:"conversationId,omitempty"`
	MessageID      int64  `json:"messageId,omitempty"`
	Content        string `json:"content,omitempty"`
	Reasoning      string `json:"reasoning,omitempty"`
	// ContentAt and ReasoningAt are where Content and Reasoning go in the
	// reply's text, in UTF-16 code units (JavaScript's string indexes): a
	// window that loaded the reply part-way through skips what it has and
	// notices a gap.
	ContentAt    int                   `json:"contentAt,omitempty"`
	ReasoningAt  int                   `json:"reasoningAt,omitempty"`
	PromptTokens int                   `json:"promptTokens,omitempty"`
	PromptDone   int                   `json:"promptDone,omitempty"`
	Message      *store.Message        `json:"message,omitempty"`
	Model        *modelhost.ModelState `json:"model,omitempty"`
	API          *APIState             `json:"api,omitempty"`
	Settings     *Settings             `json:"settings,omitempty"`
	Download     *DownloadState        `json:"download,omitempty"`
	Attachment   *AttachmentView       `json:"attachment,omitempty"`
}

// subscriberBuffer is how many events a subscriber may fall behind before
// it is dropped: at one reply event per 30 ms that is half a minute, far
// more than a live window ever lags.
const subscriberBuffer = 1024

// bus hands every event to every subscriber in order. A subscriber that
// falls behind by subscriberBuffer events has its channel closed rather
// than stall generation; a browser then reconnects and reloads.
type bus struct {
	mu   sync.Mutex
	subs map[chan Event]struct{}
}

func (b *bus) subscribe() (<-chan Event, func()) {
	ch := make(chan Event, subscriberBuffer)
	b.mu.Lock()
	if b.subs == nil {
		b.subs = map[chan Event]struct{}{}
	}
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
	}
}

func (b *bus) publish(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
			delete(b.subs, ch)
			close(ch)
		}
	}
}
