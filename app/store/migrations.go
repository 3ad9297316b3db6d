package store

import (
	"database/sql"
	"fmt"
)

// migrations take the schema from version i to i+1 (migrations[0] creates
// it in an empty file). The database's PRAGMA user_version is the number
// applied. Append only: a released step never changes, since databases out
// there were made by it.
var migrations = []string{
	// 1: conversations and their messages.
	`CREATE TABLE conversations (
		id         INTEGER PRIMARY KEY,
		title      TEXT    NOT NULL,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE messages (
		id              INTEGER PRIMARY KEY,
		conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
		role            TEXT    NOT NULL CHECK (role IN ('user', 'assistant')),
		content         TEXT    NOT NULL DEFAULT '',
		reasoning       TEXT    NOT NULL DEFAULT '',
		status          TEXT    NOT NULL,
		stats           TEXT,
		created_at      INTEGER NOT NULL
	);
	CREATE INDEX messages_by_conversation ON messages (conversation_id, id);`,

	// 2: delete with undo (a deleted conversation is hidden until the next
	// start), and the reason a reply failed.
	`ALTER TABLE conversations ADD COLUMN deleted_at INTEGER;
	ALTER TABLE messages ADD COLUMN error TEXT NOT NULL DEFAULT '';
	CREATE INDEX conversations_by_activity ON conversations (updated_at);`,

	// 3: documents attached to a question, kept with it so that a reopened
	// conversation shows them and sends them again: the text the model
	// reads, and what identifies the original file.
	`CREATE TABLE attachments (
		id              INTEGER PRIMARY KEY,
		message_id      INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
		position        INTEGER NOT NULL,
		name            TEXT    NOT NULL,
		size            INTEGER NOT NULL,
		sha256          TEXT    NOT NULL,
		format          TEXT    NOT NULL DEFAULT '',
		type            TEXT    NOT NULL DEFAULT '',
		pages           INTEGER NOT NULL DEFAULT 0,
		page_unit       TEXT    NOT NULL DEFAULT '',
		tokens          INTEGER NOT NULL,
		text            TEXT    NOT NULL,
		kept            TEXT    NOT NULL DEFAULT '',
		original_tokens INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX attachments_by_message ON attachments (message_id, position);`,

	// 4: versions. A message follows its parent (NULL for a conversation's
	// first question); a regenerated answer is a second child of the same
	// question, an edited question a second child of the same parent. The
	// conversation shows the branch that ends at leaf_id. Existing
	// conversations are one branch: each message follows the one before.
	`ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE;
	ALTER TABLE conversations ADD COLUMN leaf_id INTEGER;
	UPDATE messages SET parent_id = (SELECT MAX(p.id) FROM messages p
		WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id);
	UPDATE conversations SET leaf_id = (SELECT MAX(m.id) FROM messages m WHERE m.conversation_id = conversations.id);
	CREATE INDEX messages_by_parent ON messages (parent_id);`,

	// 5: a conversation's own settings, each "" where it follows the
	// app's (Settings): its system prompt, thinking ("on" or "off") and
	// sampling preset. Existing conversations follow the app's.
	`ALTER TABLE conversations ADD COLUMN system_prompt TEXT NOT NULL DEFAULT '';
	ALTER TABLE conversations ADD COLUMN thinking TEXT NOT NULL DEFAULT '' CHECK (thinking IN ('', 'on', 'off'));
	ALTER TABLE conversations ADD COLUMN sampling_preset TEXT NOT NULL DEFAULT '';`,
}

// migrate brings db's schema to version target, one transaction per step,
// so a crash between steps leaves a database at a version that opens.
func migrate(db *sql.DB, target int) error {
	var version int
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("reading the schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("the database has schema version %d, newer than this app knows (%d): update Suzuran", version, len(migrations))
	}
	for v := version; v < target; v++ {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrating the schema to version %d: %w", v+1, err)
		}
		// PRAGMA takes no parameters; v+1 is an int.
		if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("recording schema version %d: %w", v+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrating the schema to version %d: %w", v+1, err)
		}
	}
	return nil
}
