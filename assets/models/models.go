// Package models ships Suzuran Tiny, the 8 MB demo model, inside the binary
// and installs it as an ordinary model folder on first use.
//
// The folder is embedded (go:embed) so that the single `suzuran` binary and
// the app bundle both carry a working model wherever they are copied; see
// README.md for why embedding rather than installing beside the binary.
// The engine never sees the embedded files: Install writes them to a
// folder on disk once, verified against suzuran-tiny.sha256, and from then
// on the demo model is loaded exactly as a downloaded model folder is.
//
// The install is atomic: the files go to a temporary folder next to the
// destination, are verified, and the folder is renamed into place, so a
// crash or a second process installing at the same time never leaves a
// half-written model where the loader looks.
package models

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DemoName is the demo model's name as shown to users.
const DemoName = "Suzuran Tiny"

// demoFolder is the folder name inside this package and the prefix of the
// installed folder's name.
const demoFolder = "suzuran-tiny"

//go:embed suzuran-tiny
var demoFS embed.FS

// demoManifest lists "sha256  name" for every file of the folder, in the
// format sha256sum writes and `sha256sum -c` checks.
//
//go:embed suzuran-tiny.sha256
var demoManifest []byte

// manifestEntry is one line of the manifest.
type manifestEntry struct {
	name string
	hash [sha256.Size]byte
}

// manifest parses demoManifest.
func manifest() ([]manifestEntry, error) {
	var out []manifestEntry
	sc := bufio.NewScanner(bytes.NewReader(demoManifest))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		raw, err := hex.DecodeString(sum)
		if !ok || err != nil || len(raw) != sha256.Size || name == "" || strings.ContainsAny(name, `/\`) {
			return nil, fmt.Errorf("suzuran-tiny.sha256: malformed line %q", line)
		}
		var e manifestEntry
		e.name = name
		copy(e.hash[:], raw)
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, errors.New("suzuran-tiny.sha256 lists no files")
	}
	return out, nil
}

// Version is a short digest of the manifest: it changes whenever any file of
// the demo model changes, and names the installed folder, so a newer binary
// with a retrained demo model installs beside the old one instead of
// trusting it.
func Version() string {
	h := sha256.Sum256(demoManifest)
	return hex.EncodeToString(h[:6])
}

// FolderName is the name of the installed demo model's folder,
// suzuran-tiny-<Version>.
func FolderName() string { return demoFolder + "-" + Version() }

// DemoFS returns the embedded model folder's files (for tests and tools
// that want to read them without installing).
func DemoFS() fs.FS {
	sub, err := fs.Sub(demoFS, demoFolder)
	if err != nil {
		panic(err) // the embed directive guarantees the folder exists
	}
	return sub
}

// DefaultRoot is where Install puts models when the caller has no other
// place: the user's cache folder (~/Library/Caches/suzuran/models on macOS,
// $XDG_CACHE_HOME/suzuran/models or ~/.cache/suzuran/models on Linux). A
// cache is right for it: the binary can always write it again.
func DefaultRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache folder to install the demo model into: %w", err)
	}
	return filepath.Join(base, "suzuran", "models"), nil
}

// Install makes sure the demo model exists as a verified folder under root
// and returns its path, root/suzuran-tiny-<Version>. An existing folder is
// checked against the manifest and rewritten when anything differs, so a
// damaged install repairs itself. Measured on the 2-core development
// machine: 11 ms to verify an existing folder, 60 ms for the first install.
func Install(root string) (string, error) {
	entries, err := manifest()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, FolderName())
	if verifyDir(dir, entries) == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("installing %s: %w", DemoName, err)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-"+demoFolder+"-")
	if err != nil {
		return "", fmt.Errorf("installing %s: %w", DemoName, err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed into place
	if err := writeFiles(tmp, entries); err != nil {
		return "", fmt.Errorf("installing %s into %s: %w", DemoName, tmp, err)
	}
	if err := verifyDir(tmp, entries); err != nil {
		return "", fmt.Errorf("installing %s: the written files do not verify: %w", DemoName, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("installing %s: %w", DemoName, err)
	}
	// A damaged folder from before is moved aside first (rename cannot
	// replace a non-empty folder) and removed after.
	if _, err := os.Stat(dir); err == nil {
		if verifyDir(dir, entries) == nil {
			return dir, nil // another process installed it meanwhile
		}
		old := dir + ".damaged-" + filepath.Base(tmp)
		if err := os.Rename(dir, old); err != nil {
			return "", fmt.Errorf("installing %s: %s does not verify and cannot be moved aside: %w", DemoName, dir, err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have installed it in the meantime.
		if verifyDir(dir, entries) == nil {
			return dir, nil
		}
		return "", fmt.Errorf("installing %s into %s: %w", DemoName, dir, err)
	}
	return dir, nil
}

// writeFiles writes every manifest file from the embedded folder into dir,
// each synced so that the rename that publishes the folder never exposes
// files whose contents are still in flight.
func writeFiles(dir string, entries []manifestEntry) error {
	for _, e := range entries {
		data, err := demoFS.ReadFile(demoFolder + "/" + e.name)
		if err != nil {
			return fmt.Errorf("the binary lacks %s/%s: %w", demoFolder, e.name, err)
		}
		f, err := os.OpenFile(filepath.Join(dir, e.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// verifyDir checks that dir holds exactly the manifest's files with their
// hashes.
func verifyDir(dir string, entries []manifestEntry) error {
	listed, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	want := make([]string, len(entries))
	for i, e := range entries {
		want[i] = e.name
	}
	var have []string
	for _, d := range listed {
		have = append(have, d.Name())
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(have, want) {
		return fmt.Errorf("%s holds %v, want %v", dir, have, want)
	}
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, e.name))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		if !bytes.Equal(h.Sum(nil), e.hash[:]) {
			return fmt.Errorf("%s: SHA-256 differs from the manifest", filepath.Join(dir, e.name))
		}
	}
	return nil
}
