package docs

import (
	"errors"
	"fmt"
)

// The kinds of extraction failure. Every error Extract returns wraps one of
// them (errors.Is), so that a caller can choose what to show, and carries a
// message written for the user.
var (
	// ErrUnsupported: the file is of a type the model cannot read (an
	// image, an archive, a program, …). The message names the type.
	ErrUnsupported = errors.New("unsupported file type")
	// ErrEmpty: the file holds no bytes, or no text at all.
	ErrEmpty = errors.New("empty document")
	// ErrDamaged: the file claims a format it does not follow.
	ErrDamaged = errors.New("damaged document")
	// ErrEncrypted: the document needs a password or is under DRM.
	ErrEncrypted = errors.New("encrypted document")
	// ErrNoTextLayer: a PDF whose pages are images (a scan) without text.
	ErrNoTextLayer = errors.New("no text layer")
	// ErrTooLarge: the file is over Limits.MaxBytes.
	ErrTooLarge = errors.New("document too large")
	// ErrTooManyPages: over Limits.MaxPages pages (PDF), sheets (XLSX) or
	// chapters (EPUB).
	ErrTooManyPages = errors.New("too many pages")
	// ErrUnpackLimit: a ZIP-based document (DOCX, XLSX, EPUB) would unpack
	// to more than Limits.MaxUnpackedBytes or holds more than
	// Limits.MaxZipEntries parts: a decompression bomb, or a document too
	// large to read.
	ErrUnpackLimit = errors.New("unpacked size over the limit")
	// ErrTextLimit: the document's text is longer than Limits.MaxChars
	// characters or Limits.MaxTokens tokens.
	ErrTextLimit = errors.New("text over the limit")
	// ErrNotAFile: the path names a folder, a device, a named pipe or a
	// socket, which are refused before they are opened.
	ErrNotAFile = errors.New("not a regular file")
	// ErrUnsafe: the document holds a construct that is refused rather
	// than interpreted (an XML DOCTYPE with entity declarations).
	ErrUnsafe = errors.New("unsafe document construct")
	// ErrTimeLimit: extraction ran past Limits.Timeout.
	ErrTimeLimit = errors.New("extraction time limit")
	// ErrInternal: an extractor failed in a way it should not (a bug
	// caught so that it cannot take the app down; the fuzz test fails on
	// it).
	ErrInternal = errors.New("internal extraction error")
)

// Error is an extraction failure of one named document.
type Error struct {
	Name string // the document's name, as given to Extract
	Kind error  // one of the Err* kinds above, or a context error
	// Message says what failed and what the user can do, without the name.
	Message string
}

func (e *Error) Error() string { return e.Name + ": " + e.Message }

// Unwrap lets errors.Is match the kind.
func (e *Error) Unwrap() error { return e.Kind }

// failure builds an *Error whose message is formatted from the arguments.
func failure(name string, kind error, format string, args ...any) *Error {
	return &Error{Name: name, Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// damaged is the error of a file that does not follow the format it
// claims; what says which format, detail what the parser found.
func damaged(name, what string, detail error) *Error {
	return failure(name, ErrDamaged, "is not a readable %s (%v); open it in the program that made it, save a new copy and attach that", what, detail)
}
