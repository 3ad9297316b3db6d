package model

import "io"

// StateCodec is a Backend whose snapshots can be written out as bytes and
// read back, so that a prefix store can keep a sequence's state after a
// prefix on disk and a later process can continue from it.
//
// A snapshot read back restores a sequence exactly as the snapshot it was
// written from: the next pass's logits are bit for bit those after
// computing the prefix on the same backend with the same settings.
type StateCodec interface {
	// StateFormat names the byte format of the snapshots and everything
	// that changes the values they hold (the backend, its element types,
	// its precision and kernels), with the format's version: a snapshot
	// is only read back by a backend of the same StateFormat.
	StateFormat() string
	// WriteSnapshot writes s, which this backend made, to w.
	WriteSnapshot(w io.Writer, s Snapshot) error
	// ReadSnapshot reads a snapshot WriteSnapshot wrote. It checks every
	// length against the model's config and fails on anything that does
	// not fit; the bytes themselves are the caller's to check (a
	// checksum).
	ReadSnapshot(r io.Reader) (Snapshot, error)
}
