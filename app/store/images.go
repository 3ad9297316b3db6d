package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Image is an image sent with a question. Its bytes are stored once for
// every question that sends them (by SHA256, the hash of the bytes, which
// is also how the engine's prefix cache knows an image it has seen).
type Image struct {
	SHA256 string `json:"sha256"`
	// Name is the file's name, or what the window calls a pasted image.
	Name string `json:"name"`
	// MIME is the format: image/png, image/jpeg, image/gif, image/webp,
	// image/bmp, image/tiff or image/heic.
	MIME   string `json:"mime"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// Size is the length of the file in bytes.
	Size int64 `json:"size"`
	// Tokens is what the image costs in the model's context.
	Tokens int `json:"tokens"`
	// Page is the page of a scanned PDF the image is (from 1), 0 for an
	// image file.
	Page int `json:"page,omitempty"`
	// Data are the file's bytes. Messages read from the store leave it
	// empty (ImageData reads it); a new message carries them.
	Data []byte `json:"-"`
}

// HashImage is the SHA256 an Image of data has, in lower-case hex.
func HashImage(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// attachmentColumns are what scanAttachment reads, in its order, from an
// attachments table named a.
const attachmentColumns = `a.name, a.size, a.sha256, a.format, a.type, a.pages, a.page_unit, a.tokens, a.text,
	a.kept, a.original_tokens, a.kept_tokens, a.encoding, a.notes`

// scanAttachment reads attachmentColumns, after the message id when id is
// not nil.
func scanAttachment(row scanner, id *int64) (Attachment, error) {
	var a Attachment
	var notes string
	dest := []any{&a.Name, &a.Size, &a.SHA256, &a.Format, &a.Type, &a.Pages, &a.PageUnit, &a.Tokens, &a.Text,
		&a.Kept, &a.OriginalTokens, &a.KeptTokens, &a.Encoding, &notes}
	if id != nil {
		dest = append([]any{id}, dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return a, err
	}
	if notes != "" {
		if err := json.Unmarshal([]byte(notes), &a.Notes); err != nil {
			return a, fmt.Errorf("the notes of the attachment %s: %w", a.Name, err)
		}
	}
	return a, nil
}

// encodeNotes is the notes column of an attachment: "" for none, else a
// JSON list.
func encodeNotes(notes []string) (string, error) {
	if len(notes) == 0 {
		return "", nil
	}
	b, err := json.Marshal(notes)
	return string(b), err
}

// imageColumns are what scanImage reads, from message_images named mi and
// images named i.
const imageColumns = `mi.sha256, mi.name, i.mime, i.width, i.height, length(i.data), mi.tokens, mi.page`

func scanImage(row scanner, id *int64) (Image, error) {
	var im Image
	dest := []any{&im.SHA256, &im.Name, &im.MIME, &im.Width, &im.Height, &im.Size, &im.Tokens, &im.Page}
	if id != nil {
		dest = append([]any{id}, dest...)
	}
	return im, row.Scan(dest...)
}

// insertImages stores a message's images: the bytes of each one the
// database does not hold yet, and the message's list.
func insertImages(ctx context.Context, tx *sql.Tx, message int64, images []Image) error {
	for i, im := range images {
		if len(im.Data) > 0 {
			if got := HashImage(im.Data); im.SHA256 == "" {
				im.SHA256 = got
			} else if im.SHA256 != got {
				return fmt.Errorf("the image %s: its bytes hash to %s, not %s", im.Name, got, im.SHA256)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO images (sha256, data, mime, width, height) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (sha256) DO NOTHING`, im.SHA256, im.Data, im.MIME, im.Width, im.Height); err != nil {
				return fmt.Errorf("saving the image %s: %w", im.Name, err)
			}
		} else {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM images WHERE sha256 = ?`, im.SHA256).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("the image %s (%s) is not in the database and came without its bytes: attach it again", im.Name, im.SHA256)
			}
			if err != nil {
				return fmt.Errorf("saving the image %s: %w", im.Name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO message_images (message_id, position, sha256, name, tokens, page)
			VALUES (?, ?, ?, ?, ?, ?)`, message, i, im.SHA256, im.Name, im.Tokens, im.Page); err != nil {
			return fmt.Errorf("saving the image %s: %w", im.Name, err)
		}
	}
	return nil
}

// imagesOf returns a message's images, without their bytes.
func (s *Store) imagesOf(ctx context.Context, message int64) ([]Image, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+imageColumns+`
		FROM message_images mi JOIN images i ON i.sha256 = mi.sha256
		WHERE mi.message_id = ? ORDER BY mi.position`, message)
	if err != nil {
		return nil, fmt.Errorf("reading the images of message %d: %w", message, err)
	}
	defer rows.Close()
	var out []Image
	for rows.Next() {
		im, err := scanImage(rows, nil)
		if err != nil {
			return nil, fmt.Errorf("reading the images of message %d: %w", message, err)
		}
		out = append(out, im)
	}
	return out, rows.Err()
}

// imagesOfConversation adds the images of a conversation's messages to
// those of byID.
func (s *Store) imagesOfConversation(ctx context.Context, conversation int64, byID map[int64]*Message) error {
	rows, err := s.db.QueryContext(ctx, `SELECT mi.message_id, `+imageColumns+`
		FROM message_images mi JOIN images i ON i.sha256 = mi.sha256 JOIN messages m ON m.id = mi.message_id
		WHERE m.conversation_id = ? ORDER BY mi.message_id, mi.position`, conversation)
	if err != nil {
		return fmt.Errorf("reading the images of conversation %d: %w", conversation, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		im, err := scanImage(rows, &id)
		if err != nil {
			return fmt.Errorf("reading the images of conversation %d: %w", conversation, err)
		}
		if m := byID[id]; m != nil {
			m.Images = append(m.Images, im)
		}
	}
	return rows.Err()
}

// ImageData returns the bytes of the stored image with that hash.
func (s *Store) ImageData(ctx context.Context, sha string) ([]byte, error) {
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM images WHERE sha256 = ?`, sha).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("image %s: %w", sha, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading image %s: %w", sha, err)
	}
	return data, nil
}
