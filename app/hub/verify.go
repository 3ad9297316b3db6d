package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
)

// newVerifier returns the hash that identifies f's contents: SHA-256 for an
// LFS file, the git blob id otherwise (SHA-1 over "blob <size>\0" and the
// contents, which is how git names the file and what the hub lists).
func newVerifier(f File) hash.Hash {
	if f.SHA256 != "" {
		return sha256.New()
	}
	h := sha1.New()
	h.Write([]byte("blob " + strconv.FormatInt(f.Size, 10) + "\x00"))
	return h
}

// matches reports whether the hash's sum is f's id.
func matches(h hash.Hash, f File) bool {
	return hex.EncodeToString(h.Sum(nil)) == f.Blob()
}
