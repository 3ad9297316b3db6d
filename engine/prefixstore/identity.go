package prefixstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// hashWhole is the size below which a weight file is hashed whole (the
// demo model, the test fixtures): a few milliseconds.
const hashWhole = 64 << 20

// blobName is the name of a Hugging Face cache blob: the SHA-256 of an LFS
// file's content.
var blobName = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ModelIdentity names the weights of the model folder dir, for Space:
// config.json and generation_config.json byte for byte, and per
// .safetensors file its content's hash when that costs nothing (a
// Hugging Face cache links each file to a blob named by its SHA-256) or
// the file is small, else its size, modification time and header (every
// tensor's name, type, shape and offsets). Two folders with the same
// identity hold the same model; a model downloaded again may get a new
// identity, which only costs the snapshots of the old one.
func ModelIdentity(dir string) (string, error) {
	list, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("model identity: %w", err)
	}
	var names []string
	for _, d := range list {
		n := d.Name()
		if n == "config.json" || n == "generation_config.json" || strings.HasSuffix(n, ".safetensors") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		part, err := fileIdentity(filepath.Join(dir, n))
		if err != nil {
			return "", fmt.Errorf("model identity: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%s\x00", n, part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileIdentity(path string) (string, error) {
	if target, err := os.Readlink(path); err == nil && blobName.MatchString(filepath.Base(target)) {
		return "sha256:" + filepath.Base(target), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if info.Size() <= hashWhole || !strings.HasSuffix(path, ".safetensors") {
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
		return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
	}
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return "", err
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > 100<<20 {
		return "", fmt.Errorf("%s: a safetensors header of %d bytes", path, size)
	}
	if _, err := io.CopyN(h, f, int64(size)); err != nil {
		return "", err
	}
	return fmt.Sprintf("size:%d:mtime:%d:header:%s", info.Size(), info.ModTime().UnixNano(), hex.EncodeToString(h.Sum(nil))), nil
}

// Space is the part of a snapshot's key besides its tokens: the model's
// identity, the engine's state format version and the backend's state
// format (model.StateCodec).
func Space(model string, engineFormat int, backendFormat string) string {
	return fmt.Sprintf("model=%s;engine=%d;backend=%s", model, engineFormat, backendFormat)
}
