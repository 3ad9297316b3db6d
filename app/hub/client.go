package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog/log"
)

// Client talks to a Hugging Face hub and stores what it downloads in the
// cache. The zero values of its tuning fields pick the defaults.
type Client struct {
	Config
	// HTTP sends the requests; nil uses a client with connection and
	// header timeouts (the body of a 5 GB file has no overall deadline).
	HTTP *http.Client
	// Parallel is how many files download at once (default 4).
	Parallel int
	// Retries is how many times a failing request is tried again before
	// the error is returned (default 6, which with the default backoff
	// waits about a minute in all). A hub API call that finds the
	// connection refused or the name unresolved is not retried: the cache
	// answers at once instead.
	Retries int
	// RetryBase is the first wait before a retry, doubled each time up to
	// 30 s (default 1 s).
	RetryBase time.Duration
	// DiskMargin is the free space left on the disk after a download
	// (default 2 GB), so that macOS and other apps keep room to work.
	DiskMargin int64
	// ProgressEvery is how often Pull reports progress (default 250 ms).
	ProgressEvery time.Duration
	// StallTimeout is how long a download may receive nothing before it
	// is dropped and resumed on a new connection (default 60 s).
	StallTimeout time.Duration
}

// NewClient returns a client for the hub and cache in cfg.
func NewClient(cfg Config) *Client { return &Client{Config: cfg} }

// Cache is the client's cache folder.
func (c *Client) Cache() Cache { return Cache{Dir: c.CacheDir} }

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	TLSHandshakeTimeout:   15 * time.Second,
	ResponseHeaderTimeout: 30 * time.Second,
	IdleConnTimeout:       90 * time.Second,
	MaxIdleConnsPerHost:   8,
}}

func (c *Client) parallel() int {
	if c.Parallel > 0 {
		return c.Parallel
	}
	return 4
}

func (c *Client) retries() int {
	if c.Retries > 0 {
		return c.Retries
	}
	return 6
}

func (c *Client) backoff(attempt int) time.Duration {
	base := c.RetryBase
	if base <= 0 {
		base = time.Second
	}
	d := base << min(attempt, 10)
	return min(d, 30*time.Second)
}

func (c *Client) stallTimeout() time.Duration {
	if c.StallTimeout > 0 {
		return c.StallTimeout
	}
	return 60 * time.Second
}

// CheckMachineFor judges this computer against a model of modelBytes to be
// downloaded into the cache, as Plan does, without asking the hub.
func (c *Client) CheckMachineFor(modelBytes int64) Report {
	return CheckMachine(Need{ModelBytes: modelBytes, DownloadBytes: modelBytes, DiskMargin: c.diskMargin()}, c.CacheDir)
}

func (c *Client) diskMargin() int64 {
	if c.DiskMargin > 0 {
		return c.DiskMargin
	}
	return 2e9
}

// File is one file of a repository at a commit.
type File struct {
	Path string
	Size int64
	// GitID is the git blob id (SHA-1 of "blob <size>\0" and the contents).
	GitID string
	// SHA256 is the LFS object id, "" for files stored in git itself.
	SHA256 string
}

// Blob is the file's name in the cache's blobs folder: the LFS SHA-256,
// else the git blob id, which is the ETag the hub sends for it.
func (f File) Blob() string {
	if f.SHA256 != "" {
		return f.SHA256
	}
	return f.GitID
}

// Listing is a repository's files at one commit.
type Listing struct {
	Repo     string
	Revision string // as asked: a branch, tag or commit
	Commit   string
	Files    []File
}

// Size is the total size of the files.
func (l *Listing) Size() int64 {
	var n int64
	for _, f := range l.Files {
		n += f.Size
	}
	return n
}

// WeightBytes is the total size of the safetensors files: what the engine
// maps into memory.
func (l *Listing) WeightBytes() int64 {
	var n int64
	for _, f := range l.Files {
		if strings.HasSuffix(f.Path, ".safetensors") {
			n += f.Size
		}
	}
	return n
}

// wanted says which files of a repository a model folder needs: the
// configs, tokenizer files, chat template and safetensors weights, as
// mlx-lm's download does; other weight formats (.bin, .gguf, .pt) and
// images are left on the hub.
func wanted(p string) bool {
	base := path.Base(p)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch path.Ext(base) {
	case ".json", ".safetensors", ".jinja", ".txt", ".tiktoken", ".model", ".jsonl":
		return true
	}
	return false
}

// List asks the hub for the commit a revision points at and that commit's
// files with their sizes and hashes, following the tree listing's pages.
func (c *Client) List(ctx context.Context, repo, revision string) (*Listing, error) {
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	if revision == "" {
		revision = "main"
	}
	if err := CheckRevision(revision); err != nil {
		return nil, err
	}
	var info struct {
		SHA string `json:"sha"`
	}
	infoURL := fmt.Sprintf("%s/api/models/%s/revision/%s", c.Endpoint, repo, url.PathEscape(revision))
	if err := c.getJSON(ctx, infoURL, repo, revision, &info); err != nil {
		return nil, err
	}
	if !commitPattern.MatchString(info.SHA) {
		return nil, &Error{Kind: ErrServer, Msg: fmt.Sprintf("%s answered for %s@%s without a commit id; try again later", c.Endpoint, repo, revision)}
	}
	l := &Listing{Repo: repo, Revision: revision, Commit: info.SHA}
	next := fmt.Sprintf("%s/api/models/%s/tree/%s?recursive=true&expand=false", c.Endpoint, repo, info.SHA)
	seen := map[string]bool{}
	for page := 0; next != ""; page++ {
		if seen[next] {
			return nil, &Error{Kind: ErrServer, Msg: fmt.Sprintf("%s sent the file listing of %s back to a page it had already sent (%s); is HF_ENDPOINT (%s) a Hugging Face hub?", c.Endpoint, repo, next, c.Endpoint)}
		}
		if page == maxTreePages {
			return nil, &Error{Kind: ErrServer, Msg: fmt.Sprintf("%s listed more than %d pages of files for %s, more than any model has; is HF_ENDPOINT (%s) a Hugging Face hub?", c.Endpoint, maxTreePages, repo, c.Endpoint)}
		}
		seen[next] = true
		var entries []struct {
			Type string `json:"type"`
			Path string `json:"path"`
			Size int64  `json:"size"`
			OID  string `json:"oid"`
			LFS  *struct {
				OID  string `json:"oid"`
				Size int64  `json:"size"`
			} `json:"lfs"`
		}
		link, err := c.getJSONPage(ctx, next, repo, revision, &entries)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.Type != "file" || !wanted(e.Path) {
				continue
			}
			f := File{Path: e.Path, Size: e.Size, GitID: e.OID}
			if e.LFS != nil {
				f.SHA256, f.Size = e.LFS.OID, e.LFS.Size
			}
			if strings.Contains(f.Path, "..") || strings.HasPrefix(f.Path, "/") || !validID(f.Blob()) {
				return nil, &Error{Kind: ErrServer, Msg: fmt.Sprintf("%s listed a file %q of %s with a bad name or id; is HF_ENDPOINT (%s) a Hugging Face hub?", c.Endpoint, e.Path, repo, c.Endpoint)}
			}
			l.Files = append(l.Files, f)
		}
		next = link
	}
	return l, nil
}

// maxTreePages bounds the tree listing's pages. The hub sends up to 1,000
// files a page; a model repository holds tens of files, the largest
// repositories some thousands, so 200 pages is far beyond any model and
// still stops a listing that never ends within a second or two.
const maxTreePages = 200

var idPattern = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// validID accepts a git SHA-1 (40 hex digits) or a SHA-256 (64).
func validID(s string) bool { return idPattern.MatchString(s) }

func (c *Client) getJSON(ctx context.Context, u, repo, revision string, v any) error {
	_, err := c.getJSONPage(ctx, u, repo, revision, v)
	return err
}

// nextLink reads the URL of the next page from a Link header.
var nextLink = regexp.MustCompile(`<([^>]+)>;\s*rel="next"`)

// getJSONPage GETs a hub API URL with retries and decodes its JSON; next is
// the next page's URL from the Link header, "" on the last page.
func (c *Client) getJSONPage(ctx context.Context, u, repo, revision string, v any) (next string, err error) {
	for attempt := 0; ; attempt++ {
		next, err = c.getJSONOnce(ctx, u, repo, revision, v)
		if unreachable(err) {
			// Nothing answers (no network, the hub's name unknown): say so
			// now, so that Pull and Plan fall back to the cache at once as
			// huggingface_hub does, instead of after a minute of retries.
			return "", &Error{Kind: ErrNetwork, Err: err, Msg: fmt.Sprintf("offline: cannot reach %s (%v); check the internet connection and try again", c.Endpoint, netCause(err))}
		}
		if err == nil || !retryable(err) || attempt >= c.retries() {
			return next, finalError(err, c.Endpoint)
		}
		log.Debug().Err(err).Str("url", u).Int("attempt", attempt+1).Dur("wait", c.backoff(attempt)).Msg("hub: retrying")
		if werr := sleepCtx(ctx, c.backoff(attempt)); werr != nil {
			return "", finalError(werr, c.Endpoint)
		}
	}
}

// unreachable reports whether err says that nothing can be reached at the
// hub's address right now: the connection refused, no route to the network
// or the host, or the name not resolved. A connection that opens and then
// stalls is not this; it keeps its timeouts and retries.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && !dns.IsTimeout {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)
}

// netCause is the innermost network error, without the request's URL that
// url.Error adds ("dial tcp: lookup huggingface.co: no such host").
func netCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (c *Client) getJSONOnce(ctx context.Context, u, repo, revision string, v any) (string, error) {
	req, err := c.newRequest(ctx, u)
	if err != nil {
		return "", err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", c.statusError(resp, repo, revision, "")
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v); err != nil {
		return "", &retryableError{fmt.Errorf("reading %s: %w", u, err)}
	}
	next := ""
	if m := nextLink.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
		next = m[1]
		if ref, err := url.Parse(next); err == nil {
			next = resp.Request.URL.ResolveReference(ref).String()
		}
	}
	return next, nil
}

func (c *Client) newRequest(ctx context.Context, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &Error{Kind: ErrNetwork, Msg: fmt.Sprintf("bad hub address %q (HF_ENDPOINT): %v", c.Endpoint, err), Err: err}
	}
	req.Header.Set("User-Agent", "suzuran")
	if c.Token != "" && c.sameOrigin(req.URL) {
		// net/http drops Authorization when a redirect leaves the host, so
		// the token never reaches the CDN; a URL the hub names in a Link
		// header gets it only on the hub's own scheme and host too.
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// sameOrigin reports whether u has the endpoint's scheme and host (with
// its port): the only place the token is sent.
func (c *Client) sameOrigin(u *url.URL) bool {
	e, err := url.Parse(c.Endpoint)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Scheme, e.Scheme) && strings.EqualFold(u.Host, e.Host)
}

// statusError turns a failed response into an error a user can act on.
// The hub names the reason in X-Error-Code (RepoNotFound, GatedRepo,
// RevisionNotFound, EntryNotFound); it answers 401, not 404, for a
// repository that does not exist when no token is sent.
func (c *Client) statusError(resp *http.Response, repo, revision, file string) error {
	code := resp.Header.Get("X-Error-Code")
	what := repo
	if revision != "" && revision != "main" {
		what += "@" + revision
	}
	if file != "" {
		what += ": " + file
	}
	tokenHelp := fmt.Sprintf("create a read token at https://huggingface.co/settings/tokens and put it in the HF_TOKEN environment variable or in %s (`hf auth login` writes it there)", c.TokenFile)
	switch {
	case code == "RepoNotFound" || (resp.StatusCode == http.StatusNotFound && file == "" && code != "RevisionNotFound"):
		msg := fmt.Sprintf("%s: no such model on %s; check the name (owner/name, as on its page, for example %s)", repo, c.Endpoint, DefaultRepo)
		if c.Token == "" {
			msg += "; if it is private, " + tokenHelp
		}
		return &Error{Kind: ErrNotFound, Msg: msg}
	case code == "RevisionNotFound":
		return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf("%s has no revision %q; leave out --revision to get main, or use a branch, tag or commit listed on its page", repo, revision)}
	case resp.StatusCode == http.StatusNotFound:
		return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf("%s: the hub lists this file but does not serve it (404); try again later", what)}
	case (code == "GatedRepo" || resp.StatusCode == http.StatusForbidden) && c.Token != "":
		return &Error{Kind: ErrAuth, Msg: fmt.Sprintf("%s is gated or private: accept its terms on %s/%s while signed in, with the account whose token this is (HF_TOKEN or %s)", what, DefaultEndpoint, repo, c.TokenFile)}
	case code == "GatedRepo":
		return &Error{Kind: ErrAuth, Msg: fmt.Sprintf("%s is gated: accept its terms on %s/%s while signed in, then %s", what, DefaultEndpoint, repo, tokenHelp)}
	case resp.StatusCode == http.StatusUnauthorized && c.Token != "":
		return &Error{Kind: ErrAuth, Msg: fmt.Sprintf("%s: the hub refused the token (401); it may be expired or mistyped: %s", what, tokenHelp)}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return &Error{Kind: ErrAuth, Msg: fmt.Sprintf("%s needs a Hugging Face token (%d): %s", what, resp.StatusCode, tokenHelp)}
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return &retryableError{&Error{Kind: ErrServer, Msg: fmt.Sprintf("%s: the hub answered %s; try again later", what, resp.Status)}}
	}
	return &Error{Kind: ErrServer, Msg: fmt.Sprintf("%s: the hub answered %s", what, resp.Status)}
}

// retryableError marks a failure worth another try: the network, a
// 5xx or 429, a short body, a checksum that did not match.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// retryable reports whether err is worth another try. Network errors (a
// reset, a refused connection, a timeout) are; a cancelled context, a full
// disk and the hub's 4xx answers are not.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var r *retryableError
	if errors.As(err, &r) {
		return true
	}
	var he *Error
	if errors.As(err, &he) {
		return false
	}
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// finalError gives the error of the last try its kind: a network error
// becomes ErrNetwork with what to check.
func finalError(err error, endpoint string) error {
	if err == nil {
		return nil
	}
	var r *retryableError
	if errors.As(err, &r) {
		err = r.err
	}
	var he *Error
	if errors.As(err, &he) || errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The caller's time ran out (the welcome view waits 30 s): the hub
		// did not answer in time, which the window reports as the network.
		return &Error{Kind: ErrNetwork, Err: err, Msg: fmt.Sprintf("%s did not answer in time; check the internet connection and try again (the download resumes where it stopped)", endpoint)}
	}
	return &Error{Kind: ErrNetwork, Msg: fmt.Sprintf("cannot reach %s: %v; check the internet connection and try again (the download resumes where it stopped)", endpoint, err), Err: err}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
