package service

import (
	"fmt"
	"strconv"
)

// The prefix snapshots on disk (engine/prefixstore): the engine keeps the
// state after a long prefix there, so that a document read once is read
// back after a restart; each conversation's requests are recorded as the
// owner of the snapshots they used, and deleting the conversation deletes
// the snapshots only it used. Settings shows the space they take and
// clears them.

// prefixOwner names a conversation as the owner of prefix snapshots.
func prefixOwner(conversation int64) string {
	return "conversation:" + strconv.FormatInt(conversation, 10)
}

// PrefixCache is the space the prefix snapshots take on disk.
type PrefixCache struct {
	// Available is false when the folder could not be opened: snapshots
	// then live in memory only, until the model unloads.
	Available  bool   `json:"available"`
	Dir        string `json:"dir"`
	Bytes      int64  `json:"bytes"`
	Snapshots  int    `json:"snapshots"`
	LimitBytes int64  `json:"limitBytes"`
}

func (s *Service) prefixCache() PrefixCache {
	if s.prefix == nil {
		return PrefixCache{}
	}
	u := s.prefix.Usage()
	return PrefixCache{Available: true, Dir: s.prefix.Dir(), Bytes: u.Bytes, Snapshots: u.Snapshots, LimitBytes: u.Limit}
}

// PrefixCache says how much space the prefix snapshots take.
func (u *UI) PrefixCache() PrefixCache { return u.s.prefixCache() }

// ClearPrefixCache deletes every prefix snapshot on disk; the next long
// prompt is computed again.
func (u *UI) ClearPrefixCache() (PrefixCache, error) {
	if u.s.prefix == nil {
		return PrefixCache{}, nil
	}
	if err := u.s.prefix.Clear(); err != nil {
		return u.s.prefixCache(), fmt.Errorf("clearing the prefix snapshots in %s: %w", u.s.prefix.Dir(), err)
	}
	return u.s.prefixCache(), nil
}
