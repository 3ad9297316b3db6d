package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/suzuran-app/suzuran/app/internal/atomicfile"
)

// Cache is a Hugging Face hub cache folder, laid out as huggingface_hub
// lays it out, so that either side reuses what the other downloaded:
//
//	models--<org>--<name>/
//	  blobs/<id>                    file contents, named by the LFS SHA-256
//	                                or, for small files, the git blob id
//	  blobs/<id>.incomplete         a download in progress (resumed by Range)
//	  snapshots/<commit>/<path>     relative symlinks to ../../blobs/<id>
//	  refs/<revision>               the commit a branch or tag pointed at
//	.locks/models--<org>--<name>/<id>.lock
type Cache struct{ Dir string }

// commitPattern is a full git commit id, which needs no ref to resolve.
var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// repoPattern is what the hub accepts as a repository id.
var repoPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`)

// CheckRepo says what is wrong with a repository name, nil when nothing.
func CheckRepo(repo string) error {
	if !repoPattern.MatchString(repo) || strings.Contains(repo, "..") || strings.Contains(repo, "--") {
		return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf("%q is not a Hugging Face repository name: write it as owner/name, for example %s", repo, DefaultRepo)}
	}
	return nil
}

// CheckRevision says what is wrong with a revision, nil when nothing: a
// commit id, or a branch or tag name as git's check-ref-format allows it
// (the hub's branches and tags are git refs; "refs/pr/1" names a pull
// request). The name becomes a path under refs/, so these rules are also
// what keeps it inside the cache: no "..", no component starting with ".",
// no leading, trailing or doubled "/".
func CheckRevision(revision string) error {
	if commitPattern.MatchString(revision) {
		return nil
	}
	if problem := refProblem(revision); problem != "" {
		return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf("%q is not a revision: %s; give a branch or tag name (main, v1.0, refs/pr/1) or a full 40-character commit id, or leave out --revision to get main", revision, problem)}
	}
	return nil
}

// refProblem applies git's rules for ref names (git check-ref-format).
func refProblem(name string) string {
	switch {
	case name == "":
		return "it is empty"
	case len(name) > 255:
		return "it is longer than 255 bytes"
	case name == "@":
		return `"@" alone is not a name`
	case strings.Contains(name, ".."):
		return `it contains ".."`
	case strings.Contains(name, "@{"):
		return `it contains "@{"`
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return `it starts or ends with "/" or has an empty part between two`
	case strings.HasSuffix(name, "."):
		return `it ends with "."`
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return fmt.Sprintf("it contains %q, which git does not allow in a name", r)
		}
	}
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return fmt.Sprintf(`its part %q starts with "." or ends with ".lock"`, part)
		}
	}
	return ""
}

// RepoFolder is the cache folder name of a model repository.
func RepoFolder(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// RepoDir is the cache folder of a model repository.
func (c Cache) RepoDir(repo string) string { return filepath.Join(c.Dir, RepoFolder(repo)) }

// BlobPath is where a file's contents live.
func (c Cache) BlobPath(repo, blob string) string {
	return filepath.Join(c.RepoDir(repo), "blobs", blob)
}

// SnapshotDir is the folder of a commit's files: a model folder the engine
// loads directly.
func (c Cache) SnapshotDir(repo, commit string) string {
	return filepath.Join(c.RepoDir(repo), "snapshots", commit)
}

// lockPath is the lock huggingface_hub takes while it writes a blob.
func (c Cache) lockPath(repo, blob string) string {
	return filepath.Join(c.Dir, ".locks", RepoFolder(repo), blob+".lock")
}

// ResolveRevision turns a branch, tag or commit into the commit cached for
// it; ok is false when the cache does not know the revision.
func (c Cache) ResolveRevision(repo, revision string) (commit string, ok bool) {
	if commitPattern.MatchString(revision) {
		return revision, true
	}
	if CheckRevision(revision) != nil {
		return "", false
	}
	data, err := os.ReadFile(filepath.Join(c.RepoDir(repo), "refs", filepath.FromSlash(revision)))
	if err != nil {
		return "", false
	}
	commit = strings.TrimSpace(string(data))
	return commit, commitPattern.MatchString(commit)
}

// WriteRef records that revision points at commit.
func (c Cache) WriteRef(repo, revision, commit string) error {
	if revision == commit {
		return nil
	}
	if err := CheckRevision(revision); err != nil {
		return err
	}
	if !commitPattern.MatchString(commit) {
		return fmt.Errorf("recording %s@%s: %q is not a commit id", repo, revision, commit)
	}
	path := filepath.Join(c.RepoDir(repo), "refs", filepath.FromSlash(revision))
	if data, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(data)) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(commit), 0o644)
}

// hasBlob reports whether a complete blob of the given size is cached. A
// blob is trusted by its name and size, as huggingface_hub trusts it: it
// was verified when it was moved into place (by this package, or by a
// client that names blobs by their hash), and hashing 20 GB again on every
// start would take the better part of a minute.
func (c Cache) hasBlob(repo, blob string, size int64) bool {
	st, err := os.Stat(c.BlobPath(repo, blob))
	return err == nil && st.Mode().IsRegular() && st.Size() == size
}

// Link points snapshots/<commit>/<path> at blobs/<blob> with a relative
// symlink, as huggingface_hub does; a link or file already there that
// resolves to contents of the right size is kept.
func (c Cache) Link(repo, commit, path, blob string, size int64) error {
	link := filepath.Join(c.SnapshotDir(repo, commit), filepath.FromSlash(path))
	if st, err := os.Stat(link); err == nil && st.Mode().IsRegular() && st.Size() == size {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("making the snapshot folder: %w", err)
	}
	target, err := filepath.Rel(filepath.Dir(link), c.BlobPath(repo, blob))
	if err != nil {
		return err
	}
	// A name of this call's own: two pulls of one repository link the
	// same files at once, and each must rename its own link into place.
	tmp := fmt.Sprintf("%s.%d-%d.link", link, os.Getpid(), linkSeq.Add(1))
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("linking %s into the snapshot: %w", path, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("linking %s into the snapshot: %w", path, err)
	}
	return nil
}

// linkSeq numbers Link's temporary links within the process.
var linkSeq atomic.Uint64

// CachedSnapshot is one snapshot folder found in the cache.
type CachedSnapshot struct {
	Repo   string
	Commit string
	Dir    string
	// Refs are the branches and tags that point at this commit.
	Refs []string
}

// Snapshots lists every model snapshot in the cache.
func (c Cache) Snapshots() ([]CachedSnapshot, error) {
	repos, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the Hugging Face cache %s: %w", c.Dir, err)
	}
	var out []CachedSnapshot
	for _, r := range repos {
		name, ok := strings.CutPrefix(r.Name(), "models--")
		if !ok || !r.IsDir() {
			continue
		}
		org, model, ok := strings.Cut(name, "--")
		if !ok {
			continue
		}
		repo := org + "/" + model
		refs := map[string][]string{}
		refsDir := filepath.Join(c.Dir, r.Name(), "refs")
		filepath.WalkDir(refsDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(refsDir, p)
			commit := strings.TrimSpace(string(data))
			refs[commit] = append(refs[commit], filepath.ToSlash(rel))
			return nil
		})
		snaps, err := os.ReadDir(filepath.Join(c.Dir, r.Name(), "snapshots"))
		if err != nil {
			continue
		}
		for _, s := range snaps {
			if !s.IsDir() {
				continue
			}
			out = append(out, CachedSnapshot{
				Repo:   repo,
				Commit: s.Name(),
				Dir:    filepath.Join(c.Dir, r.Name(), "snapshots", s.Name()),
				Refs:   refs[s.Name()],
			})
		}
	}
	return out, nil
}
