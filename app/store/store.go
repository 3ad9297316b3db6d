// Package store keeps the app's conversations in a SQLite database.
//
// The database is one file in the user's data folder (DefaultPath), opened
// with modernc.org/sqlite, a pure-Go SQLite, so the app needs no cgo for it.
// It runs in WAL mode with synchronous=NORMAL: a write is durable against a
// crash of the app the moment its transaction commits (the WAL is in the
// file system; only a power loss can take the last commits back), and
// readers never wait for the writer.
//
// The schema is versioned with SQLite's user_version: migrations.go lists
// every step from an empty file to the current schema, and Open applies the
// missing ones in one transaction each, so a database written by any
// earlier version of the app opens in this one.
//
// A conversation's messages form a tree: each follows its parent, so that
// an answer regenerated or a question edited is another version beside the
// earlier one rather than its replacement. The conversation shows, and the
// model reads, one branch: the one that ends at its leaf (ShowVersion
// moves it).
//
// A conversation may have settings of its own (ChatSettings: a system
// prompt, thinking on or off, a sampling preset), each empty where it
// follows the app's.
//
// A reply being generated is a message with status "streaming", rewritten as
// it grows. A process that dies mid-reply leaves it so; the next Open marks
// every such message "interrupted", which is how the UI knows to offer
// Continue and Regenerate.
//
// One process owns the database at a time (a flock on <database>.lock):
// that Open is the one that marks replies interrupted and removes the
// conversations deleted with Undo. Another process on the same file, or a
// disk too full to open it for writing, gets the database read-only, with
// ReadOnly saying why and every write failing with ErrReadOnly.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Message statuses.
const (
	StatusComplete    = "complete"    // the reply ended normally (or a user message)
	StatusStreaming   = "streaming"   // being generated now
	StatusStopped     = "stopped"     // the user pressed Stop
	StatusInterrupted = "interrupted" // the app ended while it was generated
	StatusError       = "error"       // generation failed; Error says why
)

// Conversation is one chat in the sidebar.
type Conversation struct {
	ID    int64  `json:"id"`
	Title string `json:"title"`
	// CreatedAt and UpdatedAt are Unix milliseconds.
	CreatedAt int64 `json:"createdAt"`
	UpdatedAt int64 `json:"updatedAt"`
	// Snippet is the matching text of a search hit ("" outside a search).
	Snippet string `json:"snippet,omitempty"`
	// MatchID is the message the snippet comes from, on whichever branch
	// it is (0 outside a search, or when the title matched).
	MatchID int64 `json:"matchId,omitempty"`
	// Settings are the conversation's own choices, which its turns use
	// over the app's.
	Settings ChatSettings `json:"settings"`
}

// ChatSettings are a conversation's own settings. Each is "" where the
// conversation follows the app's setting of the same name.
type ChatSettings struct {
	// SystemPrompt replaces the app's system prompt.
	SystemPrompt string `json:"systemPrompt"`
	// Thinking is "on" or "off".
	Thinking string `json:"thinking"`
	// SamplingPreset names one of the app's sampling presets.
	SamplingPreset string `json:"samplingPreset"`
}

// Thinking values of ChatSettings.
const (
	ThinkingOn  = "on"
	ThinkingOff = "off"
)

// Message is one turn of a conversation.
type Message struct {
	ID             int64  `json:"id"`
	ConversationID int64  `json:"conversationId"`
	Role           string `json:"role"` // "user" or "assistant"
	Content        string `json:"content"`
	// Reasoning is the assistant's thinking, "" when there was none.
	Reasoning string `json:"reasoning"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	// Stats are set on a finished assistant reply.
	Stats     *Stats `json:"stats,omitempty"`
	CreatedAt int64  `json:"createdAt"`
	// Attachments are the documents sent with a question, in order.
	Attachments []Attachment `json:"attachments,omitempty"`
	// ParentID is the message this one follows, 0 for the first question.
	ParentID int64 `json:"parentId,omitempty"`
	// Versions are the ids of this message and the others that follow the
	// same parent (answers regenerated, questions edited), oldest first;
	// absent when there is only this one.
	Versions []int64 `json:"versions,omitempty"`
}

// Attachment is a document attached to a question: the text the model
// reads and what identifies the original file.
type Attachment struct {
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Format   string `json:"format"`
	Type     string `json:"type"`
	Pages    int    `json:"pages"`
	PageUnit string `json:"pageUnit"`
	// Tokens counts Text in the model's tokens.
	Tokens int `json:"tokens"`
	// Text is what the model reads; it stays on the Go side (it may be
	// megabytes), the window shows the other fields.
	Text string `json:"-"`
	// Kept is "beginning" or "end" when the document was cut to fit the
	// context, "" when it is whole; OriginalTokens is then its length
	// before the cut.
	Kept           string `json:"kept,omitempty"`
	OriginalTokens int    `json:"originalTokens,omitempty"`
}

// Stats are what the window shows under an answer.
type Stats struct {
	PromptTokens    int     `json:"promptTokens"`
	CachedTokens    int     `json:"cachedTokens"`
	GeneratedTokens int     `json:"generatedTokens"`
	TimeToFirstMS   float64 `json:"timeToFirstMs"`
	TokensPerSecond float64 `json:"tokensPerSecond"`
	FinishReason    string  `json:"finishReason"`
	// ThinkingMS is how long the model thought before it answered, 0
	// when it did not think.
	ThinkingMS float64 `json:"thinkingMs,omitempty"`
	// Model is the name of the model that wrote the reply.
	Model string `json:"model,omitempty"`
}

// ErrNotFound is wrapped by the errors of calls naming a conversation or a
// message that does not exist (or was deleted).
var ErrNotFound = errors.New("not found")

// Store is an open database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
	// lock is the owner lock, nil when another process owns the database.
	lock *ownerLock
	// readOnly says why writes are refused, "" when they are not.
	readOnly string
}

// DefaultPath is where the app keeps its database: Application
// Support/Suzuran on macOS, $XDG_DATA_HOME/suzuran (or
// ~/.local/share/suzuran) on Linux.
func DefaultPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home folder for the conversation database: %w", err)
	}
	var dir string
	switch runtime.GOOS {
	case "darwin":
		dir = filepath.Join(home, "Library", "Application Support", "Suzuran")
	default:
		base := os.Getenv("XDG_DATA_HOME")
		if base == "" || !filepath.IsAbs(base) {
			base = filepath.Join(home, ".local", "share")
		}
		dir = filepath.Join(base, "suzuran")
	}
	return filepath.Join(dir, "suzuran.db"), nil
}

// ErrReadOnly is wrapped by the errors of writes to a Store opened
// read-only; the message says why and what to do.
var ErrReadOnly = errors.New("the conversation database is read-only")

// startupFreeSpace is the free space below which a failure to open the
// database is put down to a full disk: the WAL grows to about 4 MB (1,000
// pages of 4 KiB) before SQLite checkpoints it, the shared-memory index
// takes 32 KiB, and a long reply is rewritten as it grows.
const startupFreeSpace = 32 << 20

// Open opens (creating it if needed) the database at path, brings its
// schema up to date and marks replies left streaming by a process that
// ended as interrupted.
//
// One process owns a database (the lock <path>.lock): the second app or
// `suzuran serve` on the same file opens it read-only and leaves it as it
// is, since the owner's deleted conversations can still be restored and
// its streaming replies are live. A disk too full to open the database
// for writing also opens it read-only, when SQLite can read it so. Either
// way ReadOnly says why, and every write fails with ErrReadOnly.
func Open(path string) (*Store, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the folder of %s: %w", path, err)
	}
	lock, owner, err := lockOwner(path + ".lock")
	if err != nil {
		if reason, full := diskFull(dir); full {
			return openReadOnly(path, nil, reason)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if owner != "" {
		return openReadOnly(path, nil, fmt.Sprintf("%s is using %s: conversations are shown here but not saved; quit the other one and start this one again to work here", owner, path))
	}
	// The pragmas go in the DSN so that every pooled connection gets them.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" +
		"&_pragma=foreign_keys(ON)&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	s := &Store{db: db, path: path, lock: lock}
	if err := s.init(); err != nil {
		db.Close()
		if reason, full := diskFull(dir); full && ioOrFull(err) {
			if ro, rerr := openReadOnly(path, lock, reason); rerr == nil {
				return ro, nil
			}
			lock.release()
			return nil, fmt.Errorf("%s cannot be opened: %s. The conversations in it are intact (SQLite: %v)", path, reason, err)
		}
		lock.release()
		return nil, fmt.Errorf("%s: %w (if the file is damaged, move it away and the app starts a new one)", path, err)
	}
	return s, nil
}

// diskFull reports whether the disk holding dir has less than
// startupFreeSpace free, and says so in words.
func diskFull(dir string) (reason string, full bool) {
	free, err := freeSpace(dir)
	if err != nil || free >= startupFreeSpace {
		return "", false
	}
	return fmt.Sprintf("the disk holding %s is full (%s free; Suzuran needs at least %s free to save conversations): free up %s or more and start Suzuran again",
		dir, formatMB(free), formatMB(startupFreeSpace), formatMB(startupFreeSpace-free)), true
}

// ioOrFull reports whether err is SQLite's "disk I/O error" or "database
// or disk is full" (primary codes 10 and 13), what a full disk gives: the
// shared-memory index cannot grow, or a page cannot be written.
func ioOrFull(err error) bool {
	var coded interface{ Code() int }
	if !errors.As(err, &coded) {
		return false
	}
	code := coded.Code() & 0xff
	return code == 10 || code == 13
}

func formatMB(n int64) string {
	if n < 1e6 {
		return fmt.Sprintf("%d kB", n/1000)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// openReadOnly opens the database without writing to it: through SQLite's
// read-only mode, which reads the WAL through the shared-memory index
// (the owner's, or one left by a process that ended); else, when no WAL
// holds anything the file lacks, as an immutable file, which needs no
// index and so opens on a disk too full to make one. It changes nothing:
// no migration, no reply marked interrupted, no deleted conversation
// purged.
func openReadOnly(path string, lock *ownerLock, reason string) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s (%w)", reason, err)
	}
	var lastErr error
	for _, mode := range []string{"mode=ro", "immutable=1"} {
		if mode == "immutable=1" {
			if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
				break // the WAL holds commits the file lacks
			}
		}
		db, err := sql.Open("sqlite", "file:"+path+"?"+mode+"&_pragma=foreign_keys(ON)&_pragma=busy_timeout(5000)")
		if err != nil {
			lastErr = err
			continue
		}
		var version int
		if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
			db.Close()
			lastErr = err
			continue
		}
		if version != len(migrations) {
			db.Close()
			return nil, fmt.Errorf("%s has schema version %d and this app needs %d, which it cannot write while %s", path, version, len(migrations), reason)
		}
		return &Store{db: db, path: path, lock: lock, readOnly: reason}, nil
	}
	return nil, fmt.Errorf("%s cannot be read either (%v): %s", path, lastErr, reason)
}

// ReadOnly says why the database is open read-only ("" when it is not).
func (s *Store) ReadOnly() string { return s.readOnly }

// writable is nil on a writable database, else an ErrReadOnly error that
// says why.
func (s *Store) writable() error {
	if s.readOnly == "" {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrReadOnly, s.readOnly)
}

func (s *Store) init() error {
	var mode string
	if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("reading the journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	if err := migrate(s.db, len(migrations)); err != nil {
		return err
	}
	if _, err := s.db.Exec(`UPDATE messages SET status = ? WHERE status = ?`, StatusInterrupted, StatusStreaming); err != nil {
		return fmt.Errorf("marking unfinished replies interrupted: %w", err)
	}
	// A deletion can be undone only while the app runs.
	if _, err := s.db.Exec(`DELETE FROM conversations WHERE deleted_at IS NOT NULL`); err != nil {
		return fmt.Errorf("removing deleted conversations: %w", err)
	}
	return nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error {
	err := s.db.Close()
	s.lock.release()
	s.lock = nil
	return err
}

// IntegrityCheck runs PRAGMA integrity_check and returns its findings as an
// error, nil when the database is sound.
func (s *Store) IntegrityCheck(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity check: %s", strings.Join(problems, "; "))
	}
	return nil
}

func now() int64 { return time.Now().UnixMilli() }

// TitleFrom makes a conversation's title from its first question: the first
// line, cut at a word boundary to about 48 characters.
func TitleFrom(question string) string {
	const max = 48
	line := strings.TrimSpace(question)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = strings.TrimSpace(line[:i])
	}
	line = strings.Join(strings.Fields(line), " ")
	if line == "" {
		return "New chat"
	}
	if utf8.RuneCountInString(line) <= max {
		return line
	}
	runes := []rune(line)[:max]
	cut := string(runes)
	if i := strings.LastIndexByte(cut, ' '); i > max/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,.;:") + "…"
}

// CreateConversation adds an empty conversation.
func (s *Store) CreateConversation(ctx context.Context, title string) (Conversation, error) {
	if err := s.writable(); err != nil {
		return Conversation{}, err
	}
	t := now()
	res, err := s.db.ExecContext(ctx, `INSERT INTO conversations (title, created_at, updated_at) VALUES (?, ?, ?)`, title, t, t)
	if err != nil {
		return Conversation{}, fmt.Errorf("creating a conversation: %w", err)
	}
	id, _ := res.LastInsertId()
	return Conversation{ID: id, Title: title, CreatedAt: t, UpdatedAt: t}, nil
}

// Conversations lists conversations, the most recently active first. With
// a query it keeps those whose title or any message contains it (case is
// ignored for ASCII letters) and gives each a snippet around the match.
func (s *Store) Conversations(ctx context.Context, query string) ([]Conversation, error) {
	query = strings.TrimSpace(query)
	var rows *sql.Rows
	var err error
	if query == "" {
		rows, err = s.db.QueryContext(ctx, `SELECT id, title, created_at, updated_at, system_prompt, thinking, sampling_preset, 0, '' FROM conversations
			WHERE deleted_at IS NULL ORDER BY updated_at DESC, id DESC`)
	} else {
		pattern := "%" + escapeLike(query) + "%"
		// Every message counts, on every branch: the hit names its
		// message, so that the window can show the branch it is on.
		rows, err = s.db.QueryContext(ctx, `SELECT c.id, c.title, c.created_at, c.updated_at, c.system_prompt, c.thinking, c.sampling_preset,
				COALESCE((SELECT m.id FROM messages m WHERE m.conversation_id = c.id
					AND m.content LIKE ?1 ESCAPE '\' ORDER BY m.id LIMIT 1), 0),
				COALESCE((SELECT m.content FROM messages m WHERE m.conversation_id = c.id
					AND m.content LIKE ?1 ESCAPE '\' ORDER BY m.id LIMIT 1), '')
			FROM conversations c
			WHERE c.deleted_at IS NULL AND (c.title LIKE ?1 ESCAPE '\' OR EXISTS (
				SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE ?1 ESCAPE '\'))
			ORDER BY c.updated_at DESC, c.id DESC`, pattern)
	}
	if err != nil {
		return nil, fmt.Errorf("listing conversations: %w", err)
	}
	defer rows.Close()
	list := []Conversation{}
	for rows.Next() {
		var c Conversation
		var text string
		if err := rows.Scan(&c.ID, &c.Title, &c.CreatedAt, &c.UpdatedAt,
			&c.Settings.SystemPrompt, &c.Settings.Thinking, &c.Settings.SamplingPreset, &c.MatchID, &text); err != nil {
			return nil, err
		}
		if text != "" {
			c.Snippet = snippet(text, query)
		}
		list = append(list, c)
	}
	return list, rows.Err()
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// snippet is about 80 characters of text around the first match of query.
func snippet(text, query string) string {
	i := strings.Index(strings.ToLower(text), strings.ToLower(query))
	if i < 0 {
		i = 0
	}
	runes := []rune(text)
	at := utf8.RuneCountInString(text[:i])
	from, to := max(0, at-30), min(len(runes), at+50)
	s := strings.Join(strings.Fields(string(runes[from:to])), " ")
	if from > 0 {
		s = "…" + s
	}
	if to < len(runes) {
		s += "…"
	}
	return s
}

// Conversation returns one conversation and its messages in order.
func (s *Store) Conversation(ctx context.Context, id int64) (Conversation, []Message, error) {
	var c Conversation
	err := s.db.QueryRowContext(ctx, `SELECT id, title, created_at, updated_at, system_prompt, thinking, sampling_preset
		FROM conversations WHERE id = ? AND deleted_at IS NULL`, id).Scan(&c.ID, &c.Title, &c.CreatedAt, &c.UpdatedAt,
		&c.Settings.SystemPrompt, &c.Settings.Thinking, &c.Settings.SamplingPreset)
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil, fmt.Errorf("conversation %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return c, nil, fmt.Errorf("reading conversation %d: %w", id, err)
	}
	msgs, err := s.messages(ctx, id)
	return c, msgs, err
}

// messages returns the shown branch of a conversation: the messages from
// its first question to its leaf, each with its versions.
func (s *Store) messages(ctx context.Context, conversation int64) ([]Message, error) {
	rows, err := s.db.QueryContext(ctx, `WITH RECURSIVE path(id) AS (
			SELECT COALESCE(c.leaf_id, (SELECT MAX(m.id) FROM messages m WHERE m.conversation_id = c.id))
				FROM conversations c WHERE c.id = ?1
			UNION ALL
			SELECT m.parent_id FROM messages m JOIN path ON m.id = path.id WHERE m.parent_id IS NOT NULL)
		SELECT `+messageColumns+` FROM messages
		WHERE conversation_id = ?1 AND id IN (SELECT id FROM path) ORDER BY id`, conversation)
	if err != nil {
		return nil, fmt.Errorf("reading the messages of conversation %d: %w", conversation, err)
	}
	defer rows.Close()
	msgs := []Message{}
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	byID := map[int64]*Message{}
	for i := range msgs {
		byID[msgs[i].ID] = &msgs[i]
	}
	if err := s.versions(ctx, conversation, msgs); err != nil {
		return nil, err
	}
	atts, err := s.db.QueryContext(ctx, `SELECT a.message_id, a.name, a.size, a.sha256, a.format, a.type, a.pages,
		a.page_unit, a.tokens, a.text, a.kept, a.original_tokens
		FROM attachments a JOIN messages m ON m.id = a.message_id
		WHERE m.conversation_id = ? ORDER BY a.message_id, a.position`, conversation)
	if err != nil {
		return nil, fmt.Errorf("reading the attachments of conversation %d: %w", conversation, err)
	}
	defer atts.Close()
	for atts.Next() {
		var id int64
		var a Attachment
		if err := atts.Scan(&id, &a.Name, &a.Size, &a.SHA256, &a.Format, &a.Type, &a.Pages,
			&a.PageUnit, &a.Tokens, &a.Text, &a.Kept, &a.OriginalTokens); err != nil {
			return nil, fmt.Errorf("reading the attachments of conversation %d: %w", conversation, err)
		}
		if m := byID[id]; m != nil {
			m.Attachments = append(m.Attachments, a)
		}
	}
	return msgs, atts.Err()
}

type scanner interface{ Scan(...any) error }

// messageColumns are what scanMessage reads, in its order.
const messageColumns = `id, conversation_id, role, content, reasoning, status, error, stats, created_at, COALESCE(parent_id, 0)`

func scanMessage(row scanner) (Message, error) {
	var m Message
	var stats sql.NullString
	if err := row.Scan(&m.ID, &m.ConversationID, &m.Role, &m.Content, &m.Reasoning, &m.Status, &m.Error, &stats, &m.CreatedAt, &m.ParentID); err != nil {
		return m, err
	}
	if stats.Valid && stats.String != "" {
		m.Stats = &Stats{}
		if err := json.Unmarshal([]byte(stats.String), m.Stats); err != nil {
			return m, fmt.Errorf("message %d: stats: %w", m.ID, err)
		}
	}
	return m, nil
}

// Message returns one message.
func (s *Store) Message(ctx context.Context, id int64) (Message, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE id = ?`, id)
	m, err := scanMessage(row)
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	return m, err
}

// RenameConversation sets a conversation's title.
func (s *Store) RenameConversation(ctx context.Context, id int64, title string) error {
	title = strings.TrimSpace(title)
	if title == "" {
		return errors.New("a conversation's title cannot be empty")
	}
	return s.exec1(ctx, fmt.Sprintf("renaming conversation %d", id),
		`UPDATE conversations SET title = ? WHERE id = ? AND deleted_at IS NULL`, title, id)
}

// SetConversationSettings stores a conversation's own settings (all of
// them: a "" field follows the app's again).
func (s *Store) SetConversationSettings(ctx context.Context, id int64, cs ChatSettings) error {
	if err := cs.check(); err != nil {
		return err
	}
	return s.exec1(ctx, fmt.Sprintf("saving the settings of conversation %d", id),
		`UPDATE conversations SET system_prompt = ?, thinking = ?, sampling_preset = ? WHERE id = ? AND deleted_at IS NULL`,
		cs.SystemPrompt, cs.Thinking, cs.SamplingPreset, id)
}

func (cs ChatSettings) check() error {
	if cs.Thinking != "" && cs.Thinking != ThinkingOn && cs.Thinking != ThinkingOff {
		return fmt.Errorf("thinking %q: use on, off, or nothing to follow the app's switch", cs.Thinking)
	}
	return nil
}

// DeleteConversation hides a conversation; RestoreConversation brings it
// back until the next Open, which removes it for good.
func (s *Store) DeleteConversation(ctx context.Context, id int64) error {
	return s.exec1(ctx, fmt.Sprintf("deleting conversation %d", id),
		`UPDATE conversations SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`, now(), id)
}

// RestoreConversation undoes DeleteConversation.
func (s *Store) RestoreConversation(ctx context.Context, id int64) error {
	return s.exec1(ctx, fmt.Sprintf("restoring conversation %d", id),
		`UPDATE conversations SET deleted_at = NULL WHERE id = ? AND deleted_at IS NOT NULL`, id)
}

// exec1 runs a statement that must change exactly one row.
func (s *Store) exec1(ctx context.Context, what, query string, args ...any) error {
	if err := s.writable(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

// AddMessage appends m, with its attachments, to its conversation and
// returns it with its id.
func (s *Store) AddMessage(ctx context.Context, m Message) (Message, error) {
	if err := s.writable(); err != nil {
		return m, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return m, err
	}
	defer tx.Rollback()
	if m, err = insertMessage(ctx, tx, m); err != nil {
		return m, err
	}
	return m, tx.Commit()
}

// insertMessage is AddMessage within a transaction: m follows m.ParentID,
// or, when that is 0, the end of the conversation's shown branch. It
// becomes the end of the shown branch.
func insertMessage(ctx context.Context, tx *sql.Tx, m Message) (Message, error) {
	parent := sql.NullInt64{Int64: m.ParentID, Valid: m.ParentID != 0}
	if !parent.Valid {
		if err := tx.QueryRowContext(ctx, `SELECT leaf_id FROM conversations WHERE id = ?`, m.ConversationID).Scan(&parent); err != nil {
			return m, fmt.Errorf("adding a message to conversation %d: %w", m.ConversationID, err)
		}
	}
	return insertMessageUnder(ctx, tx, m, parent)
}

// insertMessageUnder adds m after parent (the first question when parent
// is not Valid) and makes it the end of the shown branch.
func insertMessageUnder(ctx context.Context, tx *sql.Tx, m Message, parent sql.NullInt64) (Message, error) {
	m.CreatedAt = now()
	m.ParentID = parent.Int64
	m.Versions = nil
	if m.Status == "" {
		m.Status = StatusComplete
	}
	stats, err := encodeStats(m.Stats)
	if err != nil {
		return m, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO messages (conversation_id, role, content, reasoning, status, error, stats, created_at, parent_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, m.ConversationID, m.Role, m.Content, m.Reasoning, m.Status, m.Error, stats, m.CreatedAt, parent)
	if err != nil {
		return m, fmt.Errorf("adding a message to conversation %d: %w", m.ConversationID, err)
	}
	m.ID, _ = res.LastInsertId()
	for i, a := range m.Attachments {
		if _, err := tx.ExecContext(ctx, `INSERT INTO attachments (message_id, position, name, size, sha256, format, type,
			pages, page_unit, tokens, text, kept, original_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			m.ID, i, a.Name, a.Size, a.SHA256, a.Format, a.Type, a.Pages, a.PageUnit, a.Tokens, a.Text, a.Kept, a.OriginalTokens); err != nil {
			return m, fmt.Errorf("saving the attachment %s: %w", a.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE conversations SET updated_at = ?, leaf_id = ? WHERE id = ?`, m.CreatedAt, m.ID, m.ConversationID); err != nil {
		return m, err
	}
	return m, nil
}

// UpdateMessage rewrites a message's text, status, error and stats (a reply
// as it grows and when it ends, or an edited question).
func (s *Store) UpdateMessage(ctx context.Context, m Message) error {
	stats, err := encodeStats(m.Stats)
	if err != nil {
		return err
	}
	return s.exec1(ctx, fmt.Sprintf("saving message %d", m.ID),
		`UPDATE messages SET content = ?, reasoning = ?, status = ?, error = ?, stats = ? WHERE id = ?`,
		m.Content, m.Reasoning, m.Status, m.Error, stats, m.ID)
}

// DeleteMessagesAfter removes the messages that follow message id, on
// every branch, and makes id the end of the shown branch (a reply
// continued from where it stopped). Other branches of the conversation
// stay.
func (s *Store) DeleteMessagesAfter(ctx context.Context, conversation, id int64) error {
	if err := s.writable(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// The children go, and their own children with them (ON DELETE CASCADE).
	if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE conversation_id = ? AND parent_id = ?`, conversation, id); err != nil {
		return fmt.Errorf("removing the messages after %d: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE conversations SET leaf_id = ? WHERE id = ?`, id, conversation); err != nil {
		return fmt.Errorf("removing the messages after %d: %w", id, err)
	}
	return tx.Commit()
}

func encodeStats(st *Stats) (any, error) {
	if st == nil {
		return nil, nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}
