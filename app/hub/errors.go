package hub

import "errors"

// Error kinds, matched with errors.Is. The message of the returned *Error
// says what failed and what to do; the kind lets the app react (offer a
// token field, a folder picker, a retry) without parsing it.
var (
	// ErrAuth: the hub wants a token (401), or refused the one given (403),
	// or the repository is gated and its terms are not accepted yet.
	ErrAuth = errors.New("not allowed")
	// ErrNotFound: no such repository, revision or file (404).
	ErrNotFound = errors.New("not found")
	// ErrServer: the hub kept failing (5xx, 429) after every retry.
	ErrServer = errors.New("hub error")
	// ErrNetwork: the hub could not be reached, or kept dropping the
	// connection, after every retry.
	ErrNetwork = errors.New("network error")
	// ErrDiskFull: not enough free space for the download.
	ErrDiskFull = errors.New("disk full")
	// ErrChecksum: a file kept arriving with the wrong SHA-256.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrArchitecture: the repository holds another model, or no model
	// Suzuran can run.
	ErrArchitecture = errors.New("not a model Suzuran runs")
	// ErrOffline: offline (HF_HUB_OFFLINE or no network) and no complete
	// copy in the cache.
	ErrOffline = errors.New("offline")
)

// Error is what the hub functions return for the kinds above.
type Error struct {
	Kind error
	Msg  string
	Err  error // underlying cause, if any
}

func (e *Error) Error() string { return e.Msg }

// Is matches the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }
