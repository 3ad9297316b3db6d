package store

import (
	"context"
	"fmt"
)

// AddTurn stores a question and the reply that answers it in one
// transaction, in conversation c, or in a new conversation titled c.Title
// when c.ID is 0: either all of it is stored or nothing is (a full disk
// leaves no conversation without its question, no question without its
// reply).
func (s *Store) AddTurn(ctx context.Context, c Conversation, question, reply Message) (Conversation, Message, Message, error) {
	if err := s.writable(); err != nil {
		return c, question, reply, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return c, question, reply, err
	}
	defer tx.Rollback()
	if c.ID == 0 {
		t := now()
		res, err := tx.ExecContext(ctx, `INSERT INTO conversations (title, created_at, updated_at) VALUES (?, ?, ?)`, c.Title, t, t)
		if err != nil {
			return c, question, reply, fmt.Errorf("creating a conversation: %w", err)
		}
		c.ID, _ = res.LastInsertId()
		c.CreatedAt, c.UpdatedAt = t, t
	}
	question.ConversationID, reply.ConversationID = c.ID, c.ID
	if question, err = insertMessage(ctx, tx, question); err != nil {
		return c, question, reply, err
	}
	if reply, err = insertMessage(ctx, tx, reply); err != nil {
		return c, question, reply, err
	}
	if err := tx.Commit(); err != nil {
		return c, question, reply, fmt.Errorf("saving the question: %w", err)
	}
	c.UpdatedAt = reply.CreatedAt
	return c, question, reply, nil
}
