package checkpoint

import "errors"

// Error kinds, matched with errors.Is. The message of the returned error says
// what failed and where; the kind lets callers (the app's model picker, the
// CLI) choose how to react without parsing it.
var (
	// ErrMissing: a required file (config.json, weights) is not in the folder.
	ErrMissing = errors.New("missing file")
	// ErrConfig: config.json or generation_config.json is unreadable or a
	// field is missing or out of range.
	ErrConfig = errors.New("invalid config")
	// ErrArchitecture: the folder holds another model family.
	ErrArchitecture = errors.New("unsupported architecture")
	// ErrWeights: the weights are corrupt, or a tensor is missing, left
	// over, or of the wrong shape or dtype.
	ErrWeights = errors.New("weights do not match the config")
	// ErrQuantization: the quantization block disagrees with the tensors or
	// asks for a format the engine does not read.
	ErrQuantization = errors.New("quantization mismatch")
)

// Error is what Load and ReadConfig return. Path is the file or folder the
// message is about.
type Error struct {
	Kind error
	Path string
	Msg  string
	Err  error // underlying cause, if any
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Is matches the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }
