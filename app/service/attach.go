package service

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/suzuran-app/suzuran/app/docs"
	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/app/store"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// Attachment states, as AttachmentView.State.
const (
	AttachmentReading = "reading" // being extracted and counted
	AttachmentReady   = "ready"   // extracted: Attachment is set
	AttachmentFailed  = "failed"  // Error says why (an image, a damaged file, …)
)

// AttachmentView is a document attached in the composer, before it is
// sent: the window shows it as a chip. Reading runs in the background;
// its progress and its end arrive as EventAttachment.
type AttachmentView struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	State string `json:"state"`
	// Stage, Done, Total and Unit say how far reading has come ("reading"
	// the file or "extracting" its text, then "counting" tokens).
	Stage string `json:"stage,omitempty"`
	Done  int64  `json:"done,omitempty"`
	Total int64  `json:"total,omitempty"`
	Unit  string `json:"unit,omitempty"`
	// Error, when State is failed, is written for the user, to follow
	// the file's name ("is a PNG image …; …"): what happened, for a type
	// the model cannot read the type, and what to do.
	Error      string            `json:"error,omitempty"`
	Attachment *store.Attachment `json:"attachment,omitempty"`
	// Encoding, for a text file that is read, is the character encoding
	// it was decoded from ("UTF-8", "Shift_JIS"); the chip offers the
	// others of TextEncodings (RereadAttachment). Empty for other formats.
	Encoding string `json:"encoding,omitempty"`
}

// FitView is the budget check of a question's documents, shown before
// sending when they do not fit, with the choices to keep the beginning of
// each, keep the end, or cancel.
type FitView struct {
	Fits               bool   `json:"fits"`
	Message            string `json:"message"`
	ContextTokens      int    `json:"contextTokens"`
	ConversationTokens int    `json:"conversationTokens"`
	AnswerTokens       int    `json:"answerTokens"`
	DocumentTokens     int    `json:"documentTokens"`
	AvailableTokens    int    `json:"availableTokens"`
	OverTokens         int    `json:"overTokens"`
	// NoRoom says that the conversation alone fills the context: cutting
	// cannot help, only a new conversation.
	NoRoom bool `json:"noRoom"`
}

// Keep choices for SendRequest.Keep.
const (
	KeepBeginning = string(docs.KeepBeginning)
	KeepEnd       = string(docs.KeepEnd)
)

// pastedName is the file name a pasted text gets.
const pastedName = "Pasted text.txt"

// Bounds of the attachments waiting in the composer.
const (
	// MaxUploadBytes is the largest file the window uploads (AttachData),
	// just under 24 MiB: base64 makes it a third larger, so its call (with
	// 64 KiB for the file's name and the JSON around) fits in the API
	// server's body limit, which the browser's calls go through.
	MaxUploadBytes = (server.DefaultMaxBodyBytes - 64<<10) / 4 * 3
	// AttachmentTTL is how long an attachment waits to be sent: one not
	// sent within the hour is let go (its chip says so), so that files
	// attached and forgotten do not hold memory until the app quits.
	AttachmentTTL = time.Hour
	// AttachmentBudget bounds what the waiting attachments hold together:
	// an upload's bytes while it is read, then its text. Past it, a new
	// one is refused until some are sent or removed.
	AttachmentBudget = 256 << 20
	// maxCallBytes bounds a call's body in the browser transport: the API
	// server's limit, which the calls pass first; MaxUploadBytes fits in it.
	maxCallBytes = server.DefaultMaxBodyBytes
)

// pendingAttachment is an attachment not yet sent.
type pendingAttachment struct {
	view   AttachmentView
	doc    docs.Attachment
	cancel context.CancelFunc
	// charge is what it counts against the budget; expire lets it go.
	charge int64
	expire *time.Timer
	// extract reads the file again (RereadAttachment), kept for a text
	// file once read; upload is the bytes of an upload it holds, which
	// then stay charged beside the text.
	extract func(context.Context, docs.Options) (*docs.Document, error)
	upload  int64
}

// attachments holds the attachments of the composer until they are sent
// or removed.
type attachments struct {
	mu      sync.Mutex
	pending map[string]*pendingAttachment
	// pick, set by the desktop app, shows the system's open-files dialog.
	pick func() ([]string, error)
	// held is what the pending attachments count against the budget;
	// ttl and budget are AttachmentTTL and AttachmentBudget (tests
	// shorten them).
	held   int64
	ttl    time.Duration
	budget int64
}

// forgetLocked takes p off the composer and gives its share of the
// budget back.
func (a *attachments) forgetLocked(p *pendingAttachment) {
	if a.pending[p.view.ID] != p {
		return
	}
	delete(a.pending, p.view.ID)
	a.held -= p.charge
	p.charge = 0
	if p.expire != nil {
		p.expire.Stop()
	}
}

// limits are the TTL and the budget in force.
func (a *attachments) limits() (time.Duration, int64) {
	ttl, budget := a.ttl, a.budget
	if ttl <= 0 {
		ttl = AttachmentTTL
	}
	if budget <= 0 {
		budget = AttachmentBudget
	}
	return ttl, budget
}

// SetFilePicker gives the service the desktop window's open-files dialog
// (ChooseFiles); without one ChooseFiles says to use the browser's upload.
func (s *Service) SetFilePicker(pick func() ([]string, error)) {
	s.attach.mu.Lock()
	s.attach.pick = pick
	s.attach.mu.Unlock()
}

// AttachFiles reads files given by path (dropped on the desktop window, or
// chosen in its dialog). Each returns at once as a chip being read. A path
// that is not a regular file (a folder, a device, a named pipe, a socket)
// fails without being opened (docs.ExtractFile).
func (s *Service) AttachFiles(paths []string) []AttachmentView {
	views := make([]AttachmentView, 0, len(paths))
	for _, p := range paths {
		views = append(views, s.startAttachment(p, func(ctx context.Context, o docs.Options) (*docs.Document, error) {
			return docs.ExtractFile(ctx, p, o)
		}))
	}
	return views
}

// AttachData reads a file's content sent by the window (a browser upload
// or a pasted file), base64-encoded.
func (s *Service) AttachData(name, dataBase64 string) (AttachmentView, error) {
	if strings.TrimSpace(name) == "" {
		name = pastedName
	}
	if n := base64.StdEncoding.DecodedLen(len(dataBase64)); n > MaxUploadBytes+2 {
		return AttachmentView{}, fmt.Errorf("%s is %s: the window attaches files of up to %s", baseName(name), megabytes(int64(n)), megabytes(MaxUploadBytes))
	}
	data, err := base64.StdEncoding.DecodeString(dataBase64)
	if err != nil {
		return AttachmentView{}, fmt.Errorf("%s: the upload is not valid base64 (%v): attach the file again", name, err)
	}
	if err := s.attach.reserve(baseName(name), int64(len(data))); err != nil {
		return AttachmentView{}, err
	}
	return s.startAttachmentCharged(name, int64(len(data)), func(ctx context.Context, o docs.Options) (*docs.Document, error) {
		return docs.Extract(ctx, name, data, o)
	}), nil
}

// reserve counts n bytes of a new attachment against the budget, or says
// why it cannot be attached now.
func (a *attachments) reserve(name string, n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, budget := a.limits()
	if a.held+n > budget {
		return fmt.Errorf("%s (%s) cannot be attached now: the attachments waiting to be sent hold %s, and at most %s are kept at once. Send or remove some first",
			name, megabytes(n), megabytes(a.held), megabytes(budget))
	}
	a.held += n
	return nil
}

// waited writes a time for the user ("60 minutes").
func waited(d time.Duration) string {
	if d >= time.Minute {
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	}
	return d.Round(time.Millisecond).String()
}

// megabytes writes a size for the user ("20.5 MB").
func megabytes(n int64) string {
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// startAttachment extracts and counts a document in the background,
// publishing its progress and its end as EventAttachment.
func (s *Service) startAttachment(name string, extract func(context.Context, docs.Options) (*docs.Document, error)) AttachmentView {
	return s.startAttachmentCharged(name, 0, extract)
}

// startAttachmentCharged is startAttachment for an attachment that holds
// charge bytes of the budget already (an upload's bytes, reserved).
func (s *Service) startAttachmentCharged(name string, charge int64, extract func(context.Context, docs.Options) (*docs.Document, error)) AttachmentView {
	var id [8]byte
	rand.Read(id[:])
	ctx, cancel := context.WithCancel(context.Background())
	p := &pendingAttachment{
		view:    AttachmentView{ID: hex.EncodeToString(id[:]), Name: baseName(name), State: AttachmentReading, Stage: "reading"},
		cancel:  cancel,
		charge:  charge,
		extract: extract,
		upload:  charge,
	}
	s.attach.mu.Lock()
	if s.attach.pending == nil {
		s.attach.pending = map[string]*pendingAttachment{}
	}
	s.attach.pending[p.view.ID] = p
	view := p.view
	ttl, _ := s.attach.limits()
	p.expire = time.AfterFunc(ttl, func() { s.expireAttachment(p, ttl) })
	s.attach.mu.Unlock()
	// Announced as an event too: files dropped on the desktop window reach
	// the service first, and the window learns of them from this.
	s.events.publish(Event{Type: EventAttachment, Attachment: &view})

	update := func(change func(v *AttachmentView)) {
		s.attach.mu.Lock()
		change(&p.view)
		v := p.view
		_, live := s.attach.pending[v.ID]
		s.attach.mu.Unlock()
		if live {
			s.events.publish(Event{Type: EventAttachment, Attachment: &v})
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		att, err := s.readAttachment(ctx, extract, update)
		update(func(v *AttachmentView) {
			v.Done, v.Total, v.Unit, v.Stage = 0, 0, "", ""
			if err != nil {
				v.State, v.Error = AttachmentFailed, attachmentError(err)
				p.extract = nil
				if s.attach.pending[v.ID] == p {
					s.attach.held -= p.charge // its bytes are gone
					p.charge = 0
				}
				return
			}
			p.doc = att
			a := toStored(att)
			v.State, v.Attachment, v.Encoding = AttachmentReady, &a, att.Encoding
			// From now on it holds its text, and a text file's upload
			// too, to be read again with another encoding.
			keep := p.upload
			if att.Encoding == "" {
				p.extract, keep = nil, 0
			}
			if s.attach.pending[v.ID] == p {
				charge := int64(len(att.Text)) + keep
				s.attach.held += charge - p.charge
				p.charge = charge
			}
		})
	}()
	return view
}

// expireAttachment lets go of an attachment that waited ttl without being
// sent, and tells the window.
func (s *Service) expireAttachment(p *pendingAttachment, ttl time.Duration) {
	s.attach.mu.Lock()
	if s.attach.pending[p.view.ID] != p {
		s.attach.mu.Unlock()
		return
	}
	s.attach.forgetLocked(p)
	v := p.view
	s.attach.mu.Unlock()
	p.cancel()
	v.State, v.Attachment = AttachmentFailed, nil
	v.Done, v.Total, v.Unit, v.Stage = 0, 0, "", ""
	v.Error = fmt.Sprintf("%s was not sent within %s and was let go, to free the memory it held: attach it again", v.Name, waited(ttl))
	s.events.publish(Event{Type: EventAttachment, Attachment: &v})
}

func (s *Service) readAttachment(ctx context.Context, extract func(context.Context, docs.Options) (*docs.Document, error),
	update func(func(*AttachmentView))) (docs.Attachment, error) {
	doc, err := extract(ctx, docs.Options{Progress: func(p docs.Progress) {
		update(func(v *AttachmentView) { v.Stage, v.Done, v.Total, v.Unit = p.Stage, p.Done, p.Total, p.Unit })
	}})
	if err != nil {
		return docs.Attachment{}, err
	}
	e, err := s.models.Acquire(ctx)
	if err != nil {
		return docs.Attachment{}, fmt.Errorf("the model is needed to count the document's tokens and could not load: %w", err)
	}
	defer s.models.Release()
	return docs.NewAttachment(ctx, doc, e.Tokenizer(), func(done, total int64) {
		update(func(v *AttachmentView) { v.Stage, v.Done, v.Total, v.Unit = "counting", done, total, "bytes" })
	})
}

// attachmentError is the chip's message, which the chip shows after the
// file's name: what happened and what to do, without the name again.
func attachmentError(err error) string {
	var de *docs.Error
	switch {
	case errors.As(err, &de):
		return de.Message
	case errors.Is(err, context.Canceled):
		return "cancelled"
	default:
		return err.Error()
	}
}

// RemoveAttachment cancels the reading of an attachment and takes it off
// the composer.
func (s *Service) RemoveAttachment(id string) {
	s.attach.mu.Lock()
	p := s.attach.pending[id]
	if p != nil {
		s.attach.forgetLocked(p)
	}
	s.attach.mu.Unlock()
	if p != nil {
		p.cancel()
	}
}

// RereadAttachment reads a text file attached to the composer again,
// decoded from encoding (one of docs.TextEncodings) instead of the one
// detected. The chip id is replaced by the returned one, being read.
func (s *Service) RereadAttachment(id, encoding string) (AttachmentView, error) {
	i := slices.IndexFunc(docs.TextEncodings, func(e string) bool { return strings.EqualFold(e, encoding) })
	if i < 0 {
		return AttachmentView{}, fmt.Errorf("no text encoding %q: choose one of %s", encoding, strings.Join(docs.TextEncodings, ", "))
	}
	encoding = docs.TextEncodings[i]
	s.attach.mu.Lock()
	p := s.attach.pending[id]
	switch {
	case p == nil:
		s.attach.mu.Unlock()
		return AttachmentView{}, fmt.Errorf("attachment %s is gone (removed, or already sent): attach the file again", id)
	case p.view.State != AttachmentReady || p.extract == nil:
		s.attach.mu.Unlock()
		return AttachmentView{}, fmt.Errorf("%s is not a text file that was read: only a text file can be read again with another encoding", p.view.Name)
	}
	extract, upload, name := p.extract, p.upload, p.view.Name
	s.attach.forgetLocked(p)
	s.attach.held += upload // the same bytes, held by the new reading
	s.attach.mu.Unlock()
	p.cancel()
	return s.startAttachmentCharged(name, upload, func(ctx context.Context, o docs.Options) (*docs.Document, error) {
		o.Encoding = encoding
		return extract(ctx, o)
	}), nil
}

// cancelAll stops the reading of every attachment (the app is closing).
func (a *attachments) cancelAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pending {
		p.cancel()
	}
}

// readyAttachments returns the attachments of ids, all read.
func (s *Service) readyAttachments(ids []string) ([]docs.Attachment, error) {
	s.attach.mu.Lock()
	defer s.attach.mu.Unlock()
	out := make([]docs.Attachment, 0, len(ids))
	for _, id := range ids {
		p := s.attach.pending[id]
		switch {
		case p == nil:
			return nil, fmt.Errorf("attachment %s is gone (removed, or already sent): attach the file again", id)
		case p.view.State == AttachmentReading:
			return nil, fmt.Errorf("%s is still being read: wait for its token count, or remove it", p.view.Name)
		case p.view.State == AttachmentFailed:
			return nil, errors.New(p.view.Name + ": " + p.view.Error + " Remove it to send the rest.")
		}
		out = append(out, p.doc)
	}
	return out, nil
}

// dropAttachments forgets attachments that were sent.
func (s *Service) dropAttachments(ids []string) {
	s.attach.mu.Lock()
	defer s.attach.mu.Unlock()
	for _, id := range ids {
		if p := s.attach.pending[id]; p != nil {
			s.attach.forgetLocked(p)
		}
	}
}

// answerRoom is the room a budget check keeps for the answer: enough for
// a long answer, and never more than a quarter of a small context.
func answerRoom(contextTokens int) int { return min(2048, contextTokens/4) }

// budget counts the conversation as it will be sent with question (its
// earlier documents included, the new ones not) against the engine's
// context.
func (s *Service) budget(e *engine.Engine, conversation int64, question string, think bool) (docs.Budget, error) {
	var c store.Conversation
	var history []store.Message
	if conversation != 0 {
		var err error
		if c, history, err = s.store.Conversation(context.Background(), conversation); err != nil {
			return docs.Budget{}, err
		}
	}
	turn := s.Settings().For(c.Settings, think)
	think = turn.Think
	msgs := promptMessages(turn.SystemPrompt, history, 0)
	msgs = append(msgs, chat.Message{Role: "user", Content: question})
	// Rendered as generate renders it: thinking changes the prompt's end.
	if modelhost.IsDemo(e.Dir()) {
		think = false
	}
	prompt, err := server.EncodePrompt(e, chat.RenderRequest{Messages: msgs, AddGenerationPrompt: true, EnableThinking: &think})
	if err != nil {
		if errors.Is(err, engine.ErrPromptTooLong) {
			return docs.Budget{}, fmt.Errorf("this question is too long for the model's context of %s tokens (%v): shorten it, attach the text as a document to keep part of it, or start a new conversation",
				thousands(e.ContextTokens()), err)
		}
		return docs.Budget{}, err
	}
	ctx := e.ContextTokens()
	return docs.Budget{ContextTokens: ctx, ConversationTokens: len(prompt.IDs), AnswerTokens: answerRoom(ctx)}, nil
}

// promptMessages turns stored messages before message id before (all when
// 0) into the chat messages the model reads: the system prompt, then each
// question with its documents placed before it (docs.UserMessage).
func promptMessages(system string, history []store.Message, before int64) []chat.Message {
	var msgs []chat.Message
	if sp := system; strings.TrimSpace(sp) != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: sp})
	}
	for _, m := range history {
		if before != 0 && m.ID >= before {
			break
		}
		content := m.Content
		if len(m.Attachments) > 0 {
			content = docs.UserMessage(fromStored(m.Attachments), m.Content)
		}
		msgs = append(msgs, chat.Message{Role: m.Role, Content: content})
	}
	return msgs
}

func fitView(f docs.Fit) FitView {
	return FitView{
		Fits: f.Fits, Message: f.Message(), ContextTokens: f.ContextTokens, ConversationTokens: f.ConversationTokens,
		AnswerTokens: f.AnswerTokens, DocumentTokens: f.DocumentTokens, AvailableTokens: f.AvailableTokens,
		OverTokens: f.OverTokens, NoRoom: !f.Fits && f.AvailableTokens <= 0,
	}
}

// checkQuestion refuses, before anything is stored, a question that leaves
// no room for its answer in the context beside the conversation. It needs
// the model's tokenizer: when the model is not loaded it checks nothing
// (loading takes long, and Send must answer at once), and a question too
// long fails as its reply's error instead.
func (s *Service) checkQuestion(conversation int64, question string, think bool) error {
	e := s.models.TryAcquire()
	if e == nil {
		return nil
	}
	defer s.models.Release()
	b, err := s.budget(e, conversation, question, think)
	if err != nil {
		return err
	}
	if b.ConversationTokens+b.AnswerTokens > b.ContextTokens {
		return fmt.Errorf("this question is too long for the model's context: with the conversation it holds %s of the %s tokens, and %s are kept for the answer. Shorten it, attach the text as a document to keep part of it, or start a new conversation",
			thousands(b.ConversationTokens), thousands(b.ContextTokens), thousands(b.AnswerTokens))
	}
	return nil
}

// thousands writes n with thousands separators (262,144).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// prepareAttachments checks the attachments of a question against the
// context and, when they do not fit, cuts them as keep says. It refuses
// to cut without a choice: the window asks the user first (CheckFit).
func (s *Service) prepareAttachments(ctx context.Context, conversation int64, question string, think bool, ids []string, keep string) ([]store.Attachment, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	atts, err := s.readyAttachments(ids)
	if err != nil {
		return nil, err
	}
	e, err := s.models.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("the model could not load: %w", err)
	}
	defer s.models.Release()
	b, err := s.budget(e, conversation, question, think)
	if err != nil {
		return nil, err
	}
	fit := b.Check(e.Tokenizer(), atts)
	if !fit.Fits {
		if keep == "" {
			return nil, errors.New(fit.Message())
		}
		if atts, _, err = docs.FitDocuments(ctx, e.Tokenizer(), atts, b, docs.Keep(keep)); err != nil {
			if errors.Is(err, docs.ErrNoRoom) {
				return nil, errors.New(fit.Message())
			}
			return nil, err
		}
	}
	stored := make([]store.Attachment, len(atts))
	for i, a := range atts {
		stored[i] = toStored(a)
	}
	return stored, nil
}

func toStored(a docs.Attachment) store.Attachment {
	st := store.Attachment{
		Name: a.Name, Size: a.Size, SHA256: a.SHA256, Format: string(a.Format), Type: a.Type,
		Pages: a.Pages, PageUnit: a.PageUnit, Tokens: a.Tokens, Text: a.Text,
	}
	if a.Cut != nil {
		st.Kept, st.OriginalTokens = string(a.Cut.Keep), a.Cut.OriginalTokens
	}
	return st
}

func fromStored(atts []store.Attachment) []docs.Attachment {
	out := make([]docs.Attachment, len(atts))
	for i, a := range atts {
		out[i] = docs.Attachment{
			Name: a.Name, Size: a.Size, SHA256: a.SHA256, Format: docs.Format(a.Format), Type: a.Type,
			Pages: a.Pages, PageUnit: a.PageUnit, Tokens: a.Tokens, Text: a.Text,
		}
	}
	return out
}

func baseName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		return name[i+1:]
	}
	return name
}

// AttachFiles reads files by path: those dropped on the desktop window.
// Each comes back at once as a chip being read; EventAttachment follows.
func (u *UI) AttachFiles(paths []string) []AttachmentView { return u.s.AttachFiles(paths) }

// AttachData reads a file the window sends (a browser upload, a pasted
// file or a long pasted text), its content base64-encoded.
func (u *UI) AttachData(name string, dataBase64 string) (AttachmentView, error) {
	return u.s.AttachData(name, dataBase64)
}

// ChooseFiles shows the desktop's open-files dialog and reads the chosen
// files; none chosen is an empty list.
func (u *UI) ChooseFiles() ([]AttachmentView, error) {
	u.s.attach.mu.Lock()
	pick := u.s.attach.pick
	u.s.attach.mu.Unlock()
	if pick == nil {
		return nil, errors.New("this window has no file dialog: use the browser's file upload")
	}
	paths, err := pick()
	if err != nil {
		return nil, fmt.Errorf("the file dialog failed: %w", err)
	}
	return u.s.AttachFiles(paths), nil
}

// RemoveAttachment takes an attachment off the composer, cancelling its
// reading if it is still being read.
func (u *UI) RemoveAttachment(id string) { u.s.RemoveAttachment(id) }

// RereadAttachment reads a text file on the composer again from another
// character encoding (one of TextEncodings), when the detected one reads
// wrong; the returned chip, being read, replaces chip id.
func (u *UI) RereadAttachment(id, encoding string) (AttachmentView, error) {
	return u.s.RereadAttachment(id, encoding)
}

// TextEncodings are the encodings a text file's chip offers.
func (u *UI) TextEncodings() []string { return slices.Clone(docs.TextEncodings) }

// CheckFit says whether a question's attachments fit in the context beside
// the conversation, with the numbers; the window asks it before Send and,
// when they do not fit, offers keep the beginning, keep the end, or cancel.
func (u *UI) CheckFit(req SendRequest) (FitView, error) {
	atts, err := u.s.readyAttachments(req.Attachments)
	if err != nil {
		return FitView{}, err
	}
	e, err := u.s.models.Acquire(context.Background())
	if err != nil {
		return FitView{}, fmt.Errorf("the model could not load: %w", err)
	}
	defer u.s.models.Release()
	b, err := u.s.budget(e, req.ConversationID, strings.TrimSpace(req.Text), req.Think)
	if err != nil {
		return FitView{}, err
	}
	return fitView(b.Check(e.Tokenizer(), atts)), nil
}
