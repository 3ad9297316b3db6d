package hub

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog/log"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
)

// Snapshot is a model folder in the cache, ready for the engine.
type Snapshot struct {
	Repo     string
	Revision string
	Commit   string
	// Dir is snapshots/<commit>: pass it to the engine or save it as the
	// configured model.
	Dir  string
	Size int64
	// Fetched is how many bytes this pull downloaded (0 when everything
	// was cached).
	Fetched int64
	// FromCache is true when the hub was not asked (offline) or could not
	// be reached and a complete cached snapshot was used instead.
	FromCache bool
}

// PullOptions are Pull's optional settings.
type PullOptions struct {
	// Revision is a branch, tag or commit; "" is main.
	Revision string
	// Progress, when set, is called every ProgressEvery and once at the
	// end, from one goroutine at a time; it should return quickly.
	Progress func(Progress)
}

// Pull brings a revision of a repository into the cache and returns its
// snapshot: files already cached are not requested again, partial files
// resume. Cancelling ctx pauses it: what was downloaded stays, and the next
// Pull goes on from there. Offline, or when the hub cannot be reached, a
// complete cached snapshot of the revision is returned instead, as
// huggingface_hub does.
func (c *Client) Pull(ctx context.Context, repo string, opt PullOptions) (*Snapshot, error) {
	revision := opt.Revision
	if revision == "" {
		revision = "main"
	}
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	if err := CheckRevision(revision); err != nil {
		return nil, err
	}
	if c.Offline {
		return c.cachedSnapshot(repo, revision, nil)
	}
	l, err := c.List(ctx, repo, revision)
	if err != nil {
		if errors.Is(err, ErrNetwork) || errors.Is(err, ErrServer) {
			if s, cerr := c.cachedSnapshot(repo, revision, err); cerr == nil {
				return s, nil
			}
		}
		return nil, err
	}
	return c.Download(ctx, l, opt.Progress)
}

// cachedSnapshot returns the cached snapshot of a revision when it is
// complete (Validate accepts it). cause is why the hub was not asked; nil
// means HF_HUB_OFFLINE.
func (c *Client) cachedSnapshot(repo, revision string, cause error) (*Snapshot, error) {
	why, unset := "HF_HUB_OFFLINE is set", " (and unset HF_HUB_OFFLINE)"
	if cause != nil {
		why, unset = cause.Error(), ""
	}
	cache := c.Cache()
	commit, ok := cache.ResolveRevision(repo, revision)
	if !ok {
		return nil, &Error{Kind: ErrOffline, Err: cause, Msg: fmt.Sprintf("%s, and %s@%s is not in the Hugging Face cache %s; connect to the internet%s to download it", why, repo, revision, c.CacheDir, unset)}
	}
	dir := cache.SnapshotDir(repo, commit)
	if err := Validate(dir); err != nil {
		return nil, &Error{Kind: ErrOffline, Err: cause, Msg: fmt.Sprintf("%s, and the cached copy of %s@%s is incomplete (%v); connect to the internet%s to finish the download", why, repo, revision, err, unset)}
	}
	return &Snapshot{Repo: repo, Revision: revision, Commit: commit, Dir: dir, Size: dirSize(dir), FromCache: true}, nil
}

// Download fetches the files of a listing that the cache lacks, config.json
// first: a repository whose config is not Qwen3.6-35B-A3B's is refused
// before any weight is fetched. It returns once every file is in place and
// the snapshot passes Validate.
func (c *Client) Download(ctx context.Context, l *Listing, progress func(Progress)) (*Snapshot, error) {
	config, err := modelFiles(l)
	if err != nil {
		return nil, err
	}
	remaining, err := c.remaining(l)
	if err != nil {
		return nil, err
	}
	if err := c.checkSpace(remaining); err != nil {
		return nil, err
	}
	tr := newTracker(l, progress, c.ProgressEvery)
	defer tr.stop()

	if err := c.fetchFile(ctx, l, config, tr); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(c.Cache().BlobPath(l.Repo, config.Blob()))
	if err != nil {
		return nil, err
	}
	if _, err := checkpoint.ParseConfig(raw, l.Repo+"/config.json"); err != nil {
		return nil, &Error{Kind: ErrArchitecture, Err: err, Msg: fmt.Sprintf("%v\nNothing else of %s was downloaded; choose a repository of Qwen3.6-35B-A3B, such as %s", err, l.Repo, DefaultRepo)}
	}

	var rest []File
	for _, f := range l.Files {
		if f.Path != "config.json" {
			rest = append(rest, f)
		}
	}
	// The largest files first: with several at once, the download ends
	// when the last big file does, not with a big file started last.
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].Size > rest[j].Size })
	if err := c.fetchAll(ctx, l, rest, tr); err != nil {
		return nil, err
	}
	cache := c.Cache()
	if err := cache.WriteRef(l.Repo, l.Revision, l.Commit); err != nil {
		return nil, err
	}
	dir := cache.SnapshotDir(l.Repo, l.Commit)
	if err := Validate(dir); err != nil {
		return nil, fmt.Errorf("%s@%s downloaded, but the engine cannot use it: %w", l.Repo, l.Revision, err)
	}
	tr.finish()
	return &Snapshot{Repo: l.Repo, Revision: l.Revision, Commit: l.Commit, Dir: dir, Size: l.Size(), Fetched: tr.fetched.Load()}, nil
}

// modelFiles checks that a listing looks like a model folder and returns
// its config.json.
func modelFiles(l *Listing) (File, error) {
	var config File
	weights := false
	for _, f := range l.Files {
		if f.Path == "config.json" {
			config = f
		}
		if strings.HasSuffix(f.Path, ".safetensors") {
			weights = true
		}
	}
	switch {
	case config.Path == "":
		return config, &Error{Kind: ErrArchitecture, Msg: fmt.Sprintf("%s has no config.json, so it is not a model Suzuran can run; choose a repository of Qwen3.6-35B-A3B, such as %s", l.Repo, DefaultRepo)}
	case !weights:
		return config, &Error{Kind: ErrArchitecture, Msg: fmt.Sprintf("%s has no .safetensors weights (GGUF and PyTorch files are not read); choose an MLX or safetensors repository, such as %s", l.Repo, DefaultRepo)}
	}
	return config, nil
}

// remaining is how many bytes of the listing are neither cached nor in a
// partial download.
func (c *Client) remaining(l *Listing) (int64, error) {
	cache := c.Cache()
	var n int64
	for _, f := range l.Files {
		if cache.hasBlob(l.Repo, f.Blob(), f.Size) {
			continue
		}
		n += f.Size
		if st, err := os.Stat(cache.BlobPath(l.Repo, f.Blob()) + ".incomplete"); err == nil && st.Size() <= f.Size {
			n -= st.Size()
		}
	}
	return n, nil
}

// checkSpace refuses a download the disk cannot hold with DiskMargin to
// spare.
func (c *Client) checkSpace(need int64) error {
	if need == 0 {
		return nil
	}
	free, err := FreeSpace(c.CacheDir)
	if err != nil {
		return fmt.Errorf("checking free space for %s: %w", c.CacheDir, err)
	}
	if free < need+c.diskMargin() {
		return &Error{Kind: ErrDiskFull, Msg: fmt.Sprintf("the download needs %s and the disk holding %s has %s free; free up %s (keeping %s to spare) and try again, or set HF_HUB_CACHE to a folder on a larger disk",
			bytesize.Format(need), c.CacheDir, bytesize.Format(free), bytesize.Format(need+c.diskMargin()-free), bytesize.Format(c.diskMargin()))}
	}
	return nil
}

// fetchAll downloads files Parallel at a time; the first error stops the
// others (their partial files stay for the next try).
func (c *Client) fetchAll(ctx context.Context, l *Listing, files []File, tr *tracker) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan File)
	var wg sync.WaitGroup
	for range min(c.parallel(), len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if err := c.fetchFile(ctx, l, f, tr); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
feed:
	for _, f := range files {
		select {
		case work <- f:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

// checksumRetries is how many times a file that arrived damaged is fetched
// again: a second failure on the same file is rarely chance, and each try
// of a weights shard is gigabytes.
const checksumRetries = 2

// fetchFile makes one file of the listing present in the cache and linked
// into the snapshot.
func (c *Client) fetchFile(ctx context.Context, l *Listing, f File, tr *tracker) error {
	cache := c.Cache()
	if cache.hasBlob(l.Repo, f.Blob(), f.Size) {
		tr.cached(f)
		return cache.Link(l.Repo, l.Commit, f.Path, f.Blob(), f.Size)
	}
	unlock, err := lockBlob(ctx, cache.lockPath(l.Repo, f.Blob()))
	if err != nil {
		return err
	}
	defer unlock()
	blob := cache.BlobPath(l.Repo, f.Blob())
	if cache.hasBlob(l.Repo, f.Blob(), f.Size) { // finished by whoever held the lock
		tr.cached(f)
		return cache.Link(l.Repo, l.Commit, f.Path, f.Blob(), f.Size)
	}
	p, err := openPartial(blob+".incomplete", f, tr)
	if err != nil {
		return err
	}
	defer p.close()
	tr.setCurrent(f.Path)
	damaged := 0
	for attempt := 0; ; attempt++ {
		err = c.fetchOnce(ctx, l, p)
		if err == nil {
			break
		}
		if errors.Is(err, ErrChecksum) {
			damaged++
		}
		if !retryable(err) || attempt >= c.retries() || damaged > checksumRetries {
			return finalError(err, c.Endpoint)
		}
		log.Debug().Err(err).Str("repo", l.Repo).Str("file", f.Path).Int64("have", p.have).Int("attempt", attempt+1).Msg("hub: retrying")
		if err := sleepCtx(ctx, c.backoff(attempt)); err != nil {
			return err
		}
	}
	if err := p.file.Sync(); err != nil {
		return diskError(err, f.Path, c.CacheDir)
	}
	if err := p.close(); err != nil {
		return err
	}
	if err := os.Rename(p.path, blob); err != nil {
		return fmt.Errorf("moving %s into the cache: %w", f.Path, err)
	}
	tr.fileDone()
	return cache.Link(l.Repo, l.Commit, f.Path, f.Blob(), f.Size)
}

// partial is a file being downloaded: blobs/<id>.incomplete, the running
// hash of what it holds, and how much that is.
type partial struct {
	path string
	f    File
	file *os.File
	have int64
	hash hash.Hash
	tr   *tracker
	// watchdog, while a request runs, is told of every write.
	watchdog func()
}

// openPartial opens (or creates) the .incomplete file and hashes what an
// earlier run left in it, so that the download resumes after it.
func openPartial(path string, f File, tr *tracker) (*partial, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, diskError(err, f.Path, filepath.Dir(path))
	}
	// The cache is often shared between tools and users: a link planted
	// where the partial file goes must not make the download truncate and
	// overwrite what it points at, so links are not followed and only a
	// regular file of this user's, linked from nowhere else, is written.
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|openNoFollow, 0o644)
	if err != nil {
		if st, lerr := os.Lstat(path); lerr == nil && st.Mode()&os.ModeSymlink != 0 {
			return nil, notOurPartial(path, "a symbolic link")
		}
		return nil, diskError(err, f.Path, filepath.Dir(path))
	}
	p := &partial{path: path, f: f, file: file, hash: newVerifier(f), tr: tr}
	st, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	if what := foreignFile(st); what != "" {
		file.Close()
		return nil, notOurPartial(path, what)
	}
	if st.Size() > f.Size {
		if err := p.reset(); err != nil {
			file.Close()
			return nil, err
		}
		return p, nil
	}
	n, err := io.Copy(p.hash, io.NewSectionReader(file, 0, st.Size()))
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("reading the partial download %s: %w", path, err)
	}
	p.have = n
	tr.resumed(n)
	return p, nil
}

// notOurPartial refuses to write a partial download's path that holds
// something other than a file this package made.
func notOurPartial(path, what string) error {
	return fmt.Errorf("%s is %s, not a partial download: Suzuran does not write through it. Remove it (its target is left as it is) and run the download again", path, what)
}

// Write appends downloaded bytes to the file and the hash.
func (p *partial) Write(b []byte) (int, error) {
	n, err := p.file.WriteAt(b, p.have)
	p.hash.Write(b[:n])
	p.have += int64(n)
	p.tr.fetchedBytes(int64(n))
	if p.watchdog != nil {
		p.watchdog()
	}
	if err != nil {
		return n, &writeError{err}
	}
	return n, nil
}

// reset empties the file, to download it again from the start.
func (p *partial) reset() error {
	p.tr.discard(p.have)
	p.have = 0
	p.hash = newVerifier(p.f)
	if err := p.file.Truncate(0); err != nil {
		return fmt.Errorf("emptying %s: %w", p.path, err)
	}
	return nil
}

func (p *partial) close() error {
	if p.file == nil {
		return nil
	}
	err := p.file.Close()
	p.file = nil
	return err
}

// errStalled is the cause of a request cancelled by the stall watchdog.
var errStalled = errors.New("download stalled")

// writeError marks a failure to write the file, as opposed to one reading
// the response.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// diskError names a full disk in words; other errors pass through.
func diskError(err error, file, dir string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return &Error{Kind: ErrDiskFull, Err: err, Msg: fmt.Sprintf("the disk filled up while saving %s in %s; free some space and run the download again: it resumes where it stopped", file, dir)}
	}
	return err
}

// fetchOnce requests what the partial file lacks and verifies the whole
// once complete. A body that ends early leaves its bytes for the retry.
func (c *Client) fetchOnce(ctx context.Context, l *Listing, p *partial) error {
	f := p.f
	if p.have < f.Size {
		// A connection can stall without closing (a laptop changing
		// networks): the watchdog cancels the request when no byte has
		// come for StallTimeout, and the retry resumes.
		reqCtx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		watchdog := time.AfterFunc(c.stallTimeout(), func() { cancel(errStalled) })
		defer watchdog.Stop()
		p.watchdog = func() { watchdog.Reset(c.stallTimeout()) }
		defer func() { p.watchdog = nil }()

		u := fmt.Sprintf("%s/%s/resolve/%s/%s", c.Endpoint, l.Repo, l.Commit, escapePath(f.Path))
		req, err := c.newRequest(reqCtx, u)
		if err != nil {
			return err
		}
		if p.have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", p.have))
		}
		resp, err := c.httpClient().Do(req)
		if context.Cause(reqCtx) == errStalled {
			return &retryableError{fmt.Errorf("%s: no answer for %s", f.Path, c.stallTimeout())}
		}
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusPartialContent:
			var start int64
			if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-", &start); err != nil || start != p.have {
				if err := p.reset(); err != nil {
					return err
				}
				return &retryableError{fmt.Errorf("%s: the server resumed at the wrong place (%q)", f.Path, resp.Header.Get("Content-Range"))}
			}
		case http.StatusOK:
			if p.have > 0 { // the server ignored Range: start over
				if err := p.reset(); err != nil {
					return err
				}
			}
		case http.StatusRequestedRangeNotSatisfiable:
			if err := p.reset(); err != nil {
				return err
			}
			return &retryableError{fmt.Errorf("%s: the server refused to resume (416)", f.Path)}
		default:
			return c.statusError(resp, l.Repo, l.Revision, f.Path)
		}
		_, err = io.Copy(p, io.LimitReader(resp.Body, f.Size-p.have+1))
		var we *writeError
		if errors.As(err, &we) {
			return diskError(we.err, f.Path, c.CacheDir)
		}
		if context.Cause(reqCtx) == errStalled {
			return &retryableError{fmt.Errorf("%s: nothing came for %s after %s", f.Path, c.stallTimeout(), bytesize.Format(p.have))}
		}
		if err != nil {
			return &retryableError{fmt.Errorf("%s: the connection broke after %s: %w", f.Path, bytesize.Format(p.have), err)}
		}
		if p.have < f.Size {
			return &retryableError{fmt.Errorf("%s: the connection closed after %s of %s: %w", f.Path, bytesize.Format(p.have), bytesize.Format(f.Size), io.ErrUnexpectedEOF)}
		}
	}
	if p.have != f.Size || !matches(p.hash, f) {
		what := fmt.Sprintf("its SHA-256 is not %s", f.SHA256)
		if f.SHA256 == "" {
			what = fmt.Sprintf("its git blob id is not %s", f.GitID)
		}
		if p.have != f.Size {
			what = fmt.Sprintf("it is %d bytes, the hub lists %d", p.have, f.Size)
		}
		if err := p.reset(); err != nil {
			return err
		}
		return &retryableError{&Error{Kind: ErrChecksum, Msg: fmt.Sprintf("%s: %s arrived damaged (%s) every time it was downloaded; nothing damaged was kept. Try again later or from another network", l.Repo, f.Path, what)}}
	}
	return nil
}

// escapePath escapes each segment of a repository path for a URL.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// dirSize is the total size of the files a folder holds, links followed.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			n += st.Size()
		}
		return nil
	})
	return n
}
