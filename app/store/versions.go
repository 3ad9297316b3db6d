package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// versions sets Versions on the messages of a branch: the ids of all the
// messages that follow the same parent, where there is more than one.
func (s *Store) versions(ctx context.Context, conversation int64, branch []Message) error {
	rows, err := s.db.QueryContext(ctx, `SELECT id, COALESCE(parent_id, 0) FROM messages
		WHERE conversation_id = ? ORDER BY id`, conversation)
	if err != nil {
		return fmt.Errorf("reading the versions of conversation %d: %w", conversation, err)
	}
	defer rows.Close()
	children := map[int64][]int64{}
	for rows.Next() {
		var id, parent int64
		if err := rows.Scan(&id, &parent); err != nil {
			return err
		}
		children[parent] = append(children[parent], id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range branch {
		if v := children[branch[i].ParentID]; len(v) > 1 {
			branch[i].Versions = v
		}
	}
	return nil
}

// AddQuestionVersion stores question as another version of the question
// of: it follows the same parent, so the answers to the earlier version
// stay as they are, and reply answers it. The earlier version's documents
// go with it. Both are stored, or neither, and become the shown branch.
func (s *Store) AddQuestionVersion(ctx context.Context, of int64, question, reply Message) (Message, Message, error) {
	if err := s.writable(); err != nil {
		return question, reply, err
	}
	old, err := s.Message(ctx, of)
	if err != nil {
		return question, reply, err
	}
	if old.Role != "user" {
		return question, reply, fmt.Errorf("message %d is a reply: only questions can be edited", of)
	}
	atts, err := s.attachmentsOf(ctx, of)
	if err != nil {
		return question, reply, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return question, reply, err
	}
	defer tx.Rollback()
	question.ConversationID, question.Role, question.Attachments = old.ConversationID, "user", atts
	if question, err = insertMessageUnder(ctx, tx, question, sql.NullInt64{Int64: old.ParentID, Valid: old.ParentID != 0}); err != nil {
		return question, reply, err
	}
	reply.ConversationID, reply.ParentID = old.ConversationID, question.ID
	if reply, err = insertMessage(ctx, tx, reply); err != nil {
		return question, reply, err
	}
	if err := tx.Commit(); err != nil {
		return question, reply, fmt.Errorf("saving the edited question: %w", err)
	}
	return question, reply, nil
}

func (s *Store) attachmentsOf(ctx context.Context, message int64) ([]Attachment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, size, sha256, format, type, pages, page_unit, tokens, text, kept, original_tokens
		FROM attachments WHERE message_id = ? ORDER BY position`, message)
	if err != nil {
		return nil, fmt.Errorf("reading the attachments of message %d: %w", message, err)
	}
	defer rows.Close()
	var atts []Attachment
	for rows.Next() {
		var a Attachment
		if err := rows.Scan(&a.Name, &a.Size, &a.SHA256, &a.Format, &a.Type, &a.Pages, &a.PageUnit, &a.Tokens, &a.Text, &a.Kept, &a.OriginalTokens); err != nil {
			return nil, err
		}
		atts = append(atts, a)
	}
	return atts, rows.Err()
}

// ShowVersion makes the branch through message id the one the
// conversation shows (and the one the model reads next): from id on it
// follows the latest message at each step.
func (s *Store) ShowVersion(ctx context.Context, id int64) error {
	if err := s.writable(); err != nil {
		return err
	}
	m, err := s.Message(ctx, id)
	if err != nil {
		return err
	}
	leaf := id
	for {
		var next sql.NullInt64
		if err := s.db.QueryRowContext(ctx, `SELECT MAX(id) FROM messages WHERE parent_id = ?`, leaf).Scan(&next); err != nil {
			return fmt.Errorf("showing message %d: %w", id, err)
		}
		if !next.Valid {
			break
		}
		leaf = next.Int64
	}
	return s.exec1(ctx, fmt.Sprintf("showing message %d", id),
		`UPDATE conversations SET leaf_id = ? WHERE id = ? AND deleted_at IS NULL`, leaf, m.ConversationID)
}

// AllMessages returns every message of a conversation, on every branch,
// in the order they were written (a parent before its children), with
// their attachments, and the id of the end of the shown branch.
func (s *Store) AllMessages(ctx context.Context, conversation int64) ([]Message, int64, error) {
	var leaf sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(leaf_id, (SELECT MAX(m.id) FROM messages m WHERE m.conversation_id = c.id))
		FROM conversations c WHERE id = ? AND deleted_at IS NULL`, conversation).Scan(&leaf); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, 0, fmt.Errorf("conversation %d: %w", conversation, ErrNotFound)
		}
		return nil, 0, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE conversation_id = ? ORDER BY id`, conversation)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var msgs []Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, 0, err
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	rows.Close()
	for i := range msgs {
		if msgs[i].Attachments, err = s.attachmentsOf(ctx, msgs[i].ID); err != nil {
			return nil, 0, err
		}
	}
	return msgs, leaf.Int64, nil
}

// ImportConversation stores a conversation read from a file, in one
// transaction: all of it or nothing. msgs come parents first; their IDs
// and ParentIDs are the file's own (0: the first question) and leaf is
// the file's id of the shown branch's end (0: the last message); settings
// are the conversation's own. The stored messages get new ids.
func (s *Store) ImportConversation(ctx context.Context, title string, createdAt int64, settings ChatSettings, msgs []Message, leaf int64) (Conversation, error) {
	if err := s.writable(); err != nil {
		return Conversation{}, err
	}
	if err := settings.check(); err != nil {
		return Conversation{}, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Conversation{}, err
	}
	defer tx.Rollback()
	t := now()
	if createdAt <= 0 {
		createdAt = t
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO conversations (title, created_at, updated_at, system_prompt, thinking, sampling_preset)
		VALUES (?, ?, ?, ?, ?, ?)`, title, createdAt, t, settings.SystemPrompt, settings.Thinking, settings.SamplingPreset)
	if err != nil {
		return Conversation{}, fmt.Errorf("creating a conversation: %w", err)
	}
	c := Conversation{Title: title, CreatedAt: createdAt, UpdatedAt: t, Settings: settings}
	c.ID, _ = res.LastInsertId()
	ids := map[int64]int64{}
	var last int64
	for i, m := range msgs {
		parent := sql.NullInt64{}
		if m.ParentID != 0 {
			p, ok := ids[m.ParentID]
			if !ok {
				return Conversation{}, fmt.Errorf("message %d follows message %d, which does not come before it", i+1, m.ParentID)
			}
			parent = sql.NullInt64{Int64: p, Valid: true}
		}
		fileID, created := m.ID, m.CreatedAt
		m.ID, m.ConversationID = 0, c.ID
		if m.Status == StatusStreaming {
			m.Status = StatusInterrupted
		}
		stored, err := insertMessageUnder(ctx, tx, m, parent)
		if err != nil {
			return Conversation{}, err
		}
		if created > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET created_at = ? WHERE id = ?`, created, stored.ID); err != nil {
				return Conversation{}, err
			}
		}
		if fileID != 0 {
			ids[fileID] = stored.ID
		}
		last = stored.ID
	}
	if leaf != 0 {
		l, ok := ids[leaf]
		if !ok {
			return Conversation{}, fmt.Errorf("the shown message %d is not in the file", leaf)
		}
		last = l
	}
	if last != 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE conversations SET leaf_id = ?, updated_at = ? WHERE id = ?`, last, t, c.ID); err != nil {
			return Conversation{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Conversation{}, fmt.Errorf("saving the imported conversation: %w", err)
	}
	return c, nil
}
