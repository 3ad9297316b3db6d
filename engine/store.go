package engine

import (
	"errors"
	"io"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/prefixstore"
)

// The prefix store on disk (Options.Store) under the memory cache: the
// snapshots at checkpoints of StoreMinTokens or more are written to it off
// the answering path, and a prompt whose longest stored prefix is longer
// than the memory cache's hit reads it back. The key's space names the
// model, this engine's format and the backend's state format, so that a
// snapshot is only read back where it gives the same logits.

// storeCodec is the backend's state codec and the store's space for it,
// or nil when the engine keeps nothing on disk.
func (e *Engine) storeCodec() (model.StateCodec, string) {
	if e.opts.Store == nil || e.opts.ModelIdentity == "" {
		return nil, ""
	}
	c, ok := e.backend.(model.StateCodec)
	if !ok {
		return nil, ""
	}
	return c, prefixstore.Space(e.opts.ModelIdentity, StateFormatVersion, c.StateFormat())
}

// errKey is a stored snapshot whose state is not that of its key's tokens.
var errKey = errors.New("the snapshot's tokens do not match its key")

// loadStored reads the longest stored prefix of prompt with more than min
// and at most max tokens; nil when there is none (or none that reads
// back: the store logs and deletes those).
func (e *Engine) loadStored(prompt []int, min, max int, owner string) model.Snapshot {
	codec, space := e.storeCodec()
	if codec == nil || max <= min {
		return nil
	}
	var snap model.Snapshot
	n := e.opts.Store.Load(space, prompt, min, max, owner, func(r io.Reader, tokens []int) error {
		s, err := codec.ReadSnapshot(r)
		if err != nil {
			return err
		}
		if s.Pos() != len(tokens) || !sameTokens(s.Tokens(), tokens) {
			return errKey
		}
		snap = s
		return nil
	})
	if n == 0 {
		return nil
	}
	return snap
}

// sameTokens reports whether a snapshot's tokens are its key's: equal
// where the key holds token ids, and anything under an image's run, where
// the key holds ids derived from the image's hash (images.go).
func sameTokens(state, key []int) bool {
	if len(state) != len(key) {
		return false
	}
	for i, id := range key {
		if id >= 0 && state[i] != id {
			return false
		}
	}
	return true
}

// saveStored queues snap, the state after tokens, for the store unless it
// holds it already (it then records owner beside it).
func (e *Engine) saveStored(snap model.Snapshot, tokens []int, owner string) {
	codec, space := e.storeCodec()
	if codec == nil || len(tokens) < e.opts.StoreMinTokens {
		return
	}
	e.opts.Store.Save(space, tokens, owner, func(w io.Writer) error { return codec.WriteSnapshot(w, snap) })
}

// ownStored records that owner used the stored snapshot of tokens, which
// the memory cache served.
func (e *Engine) ownStored(tokens []int, owner string) {
	codec, space := e.storeCodec()
	if codec == nil || owner == "" || len(tokens) < e.opts.StoreMinTokens {
		return
	}
	e.opts.Store.Own(space, tokens, owner)
}
