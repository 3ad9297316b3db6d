package server

import (
	"context"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/engine"
)

// Models is what the server needs from whoever owns the engine: a
// modelhost.Host, the window's or serve's.
type Models interface {
	// Current returns the engine to run a request on and the model's name.
	// While the model loads it returns an error wrapping
	// modelhost.ErrLoading (the server answers 503 with the progress from
	// Status).
	Current(ctx context.Context) (*engine.Engine, string, error)
	Status() modelhost.ModelState
}

// ThinkingDefaulter is implemented by Models whose default for thinking
// follows the model loaded (modelhost.Host turns it off for a model that
// cannot think); where it says (not nil), it takes the place of
// Config.ThinkingDefault.
type ThinkingDefaulter interface {
	ThinkingDefault() *bool
}

// thinkingDefault is whether a request that does not say thinks.
func (s *Server) thinkingDefault() *bool {
	if d, ok := s.cfg.Models.(ThinkingDefaulter); ok {
		if think := d.ThinkingDefault(); think != nil {
			return think
		}
	}
	return s.cfg.ThinkingDefault
}
