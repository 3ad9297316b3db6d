// Package fakehub is a Hugging Face hub for tests: a real HTTP server that
// speaks the parts of the hub API a download uses, so that the client is
// tested over the network stack it meets in use.
//
// It serves, for each repository added:
//
//	GET /api/models/<repo>/revision/<rev>    {"id", "sha", "siblings"}
//	GET /api/models/<repo>/tree/<rev>        the recursive listing, PageSize
//	                                         entries a page with a Link header
//	POST /api/models/<repo>/paths-info/<rev> the same entries for given paths
//	GET /<repo>/resolve/<rev>/<path>         small files directly (ETag: git
//	                                         blob id); LFS files (.safetensors)
//	                                         by a 302 to /cdn/<sha256>, as the
//	                                         hub redirects to its CDN
//	GET /cdn/<sha256>                        the contents, with Range
//
// and answers as the hub does for what is missing (401 RepoNotFound without
// a token, 404 with one; 404 RevisionNotFound). It counts every request and
// the bytes it sent per file, and can be told to fail: a status for the
// next N requests of a file or of the API, a connection dropped after some
// bytes, a corrupted byte, a throttled speed.
package fakehub

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// File is one file of a repository.
type File struct {
	Data   []byte
	LFS    bool   // stored in LFS: listed with its SHA-256, served by the CDN
	GitID  string // git blob id
	SHA256 string
}

// Repo is a repository at one commit, its main branch.
type Repo struct {
	ID     string
	Commit string
	Files  map[string]*File
}

// Fault makes the hub misbehave for a file.
type Fault struct {
	// Status answers the file's resolve request with this status...
	Status int
	// ...for this many requests (0: every request).
	Times int
	// DropAfter closes the connection once this many bytes of the body
	// were sent (0: never); for Times requests.
	DropAfter int64
	// Corrupt flips a byte in the middle of the body; for Times requests.
	Corrupt bool
	// BytesPerSecond slows the body down (0: full speed), on every request.
	BytesPerSecond int
	// StallAfter stops sending, without closing the connection, once this
	// many bytes of the body were sent (0: never), until the client gives
	// up; for Times requests.
	StallAfter int64
	// IgnoreRange answers a Range request with the whole file (200), as
	// some proxies do; for Times requests.
	IgnoreRange bool
}

// Hub is the fake hub. Its methods are safe for concurrent use.
type Hub struct {
	URL string
	// Token, when set, is required (as a Bearer token) by every repository.
	Token string
	// PageSize is how many entries a tree page holds.
	PageSize int
	// BeforeBody, when set, runs before a file's body is sent.
	BeforeBody func(path string)

	srv      *httptest.Server
	mu       sync.Mutex
	repos    map[string]*Repo
	faults   map[string]*Fault
	apiFault *Fault
	resolves map[string]int   // resolve requests per file path
	cdn      map[string]int   // CDN requests per file path
	sent     map[string]int64 // body bytes sent per file path
	ranges   map[string][]string
	api      int
}

// New starts a fake hub that stops when the test ends.
func New(t testing.TB) *Hub {
	h := Start()
	t.Cleanup(h.srv.Close)
	return h
}

// Start starts a fake hub outside a test (cmd/fakehub, for the browser
// end-to-end test); Close stops it.
func Start() *Hub {
	h := &Hub{
		PageSize: 3,
		repos:    map[string]*Repo{}, faults: map[string]*Fault{},
		resolves: map[string]int{}, cdn: map[string]int{}, sent: map[string]int64{}, ranges: map[string][]string{},
	}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	h.URL = h.srv.URL
	return h
}

// Close stops the server (a hub that has gone away).
func (h *Hub) Close() { h.srv.Close() }

// AddDir adds a repository holding the files of a folder, plus a
// .gitattributes and a README.md as every hub repository has. .safetensors
// files are LFS files.
func (h *Hub) AddDir(t testing.TB, id, dir string) *Repo {
	r, err := h.AddFolder(id, dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// AddFolder is AddDir outside a test.
func (h *Hub) AddFolder(id, dir string) (*Repo, error) {
	files := map[string][]byte{
		".gitattributes": []byte("*.safetensors filter=lfs diff=lfs merge=lfs -text\n"),
		"README.md":      []byte("# " + id + "\n"),
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = data
	}
	return h.Add(id, files), nil
}

// Add adds a repository with the given files.
func (h *Hub) Add(id string, files map[string][]byte) *Repo {
	r := &Repo{ID: id, Files: map[string]*File{}}
	commit := sha1.New()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		data := files[name]
		git := sha1.Sum(append([]byte("blob "+strconv.Itoa(len(data))+"\x00"), data...))
		sum := sha256.Sum256(data)
		f := &File{Data: data, LFS: strings.HasSuffix(name, ".safetensors"), GitID: hex.EncodeToString(git[:]), SHA256: hex.EncodeToString(sum[:])}
		r.Files[name] = f
		fmt.Fprintf(commit, "%s %s\n", name, f.GitID)
	}
	r.Commit = hex.EncodeToString(commit.Sum(nil))
	h.mu.Lock()
	h.repos[id] = r
	h.mu.Unlock()
	return r
}

// SetFault makes requests for a file (by path in its repository) fail.
func (h *Hub) SetFault(path string, f Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults[path] = &f
}

// SetAPIFault makes API requests answer f.Status, f.Times times.
func (h *Hub) SetAPIFault(f Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.apiFault = &f
}

// Resolves is how many resolve requests a file got.
func (h *Hub) Resolves(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resolves[path]
}

// CDNRequests is how many CDN requests an LFS file got.
func (h *Hub) CDNRequests(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cdn[path]
}

// FileRequests is every request for the contents of files (resolve and
// CDN), all files together.
func (h *Hub) FileRequests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.resolves {
		n += c
	}
	for _, c := range h.cdn {
		n += c
	}
	return n
}

// APIRequests is how many API requests came.
func (h *Hub) APIRequests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.api
}

// Sent is how many body bytes of a file were sent.
func (h *Hub) Sent(path string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent[path]
}

// Ranges are the Range headers of a file's body requests, "" for none.
func (h *Hub) Ranges(path string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ranges[path]...)
}

// ResetCounts forgets the requests counted so far.
func (h *Hub) ResetCounts() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resolves, h.cdn, h.sent, h.ranges, h.api = map[string]int{}, map[string]int{}, map[string]int64{}, map[string][]string{}, 0
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/api/models/"):
		h.serveAPI(w, r, strings.TrimPrefix(p, "/api/models/"))
	case strings.HasPrefix(p, "/cdn/"):
		h.serveCDN(w, r, strings.TrimPrefix(p, "/cdn/"))
	case strings.Contains(p, "/resolve/"):
		h.serveResolve(w, r, strings.TrimPrefix(p, "/"))
	default:
		http.NotFound(w, r)
	}
}

// repo finds a repository by the first two segments of rest and checks the
// token; ok false means an error was written.
func (h *Hub) repo(w http.ResponseWriter, r *http.Request, rest string) (repo *Repo, tail string, ok bool) {
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 3 {
		http.NotFound(w, r)
		return nil, "", false
	}
	h.mu.Lock()
	repo = h.repos[parts[0]+"/"+parts[1]]
	h.mu.Unlock()
	authorized := h.Token == "" || r.Header.Get("Authorization") == "Bearer "+h.Token
	if repo == nil || !authorized {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		status := http.StatusUnauthorized // what the hub answers without a valid token
		if r.Header.Get("Authorization") != "" && authorized {
			status = http.StatusNotFound
		}
		http.Error(w, `{"error":"Repository Not Found"}`, status)
		return nil, "", false
	}
	return repo, parts[2], true
}

// revision checks that rev names the repository's commit (main or its id).
func revisionOK(w http.ResponseWriter, repo *Repo, rev string) bool {
	if rev == "main" || rev == repo.Commit {
		return true
	}
	w.Header().Set("X-Error-Code", "RevisionNotFound")
	http.Error(w, `{"error":"Invalid rev id"}`, http.StatusNotFound)
	return false
}

// takeFault returns the fault for a key if it still applies, counting it.
func takeFault(f *Fault) *Fault {
	if f == nil {
		return nil
	}
	if f.Times < 0 {
		return nil
	}
	if f.Times > 0 {
		f.Times--
		if f.Times == 0 {
			f.Times = -1 // used up
		}
	}
	return f
}

func (h *Hub) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	h.mu.Lock()
	h.api++
	fault := takeFault(h.apiFault)
	h.mu.Unlock()
	if fault != nil && fault.Status != 0 {
		http.Error(w, http.StatusText(fault.Status), fault.Status)
		return
	}
	repo, tail, ok := h.repo(w, r, rest)
	if !ok {
		return
	}
	kind, rev, _ := strings.Cut(tail, "/")
	if !revisionOK(w, repo, rev) {
		return
	}
	names := make([]string, 0, len(repo.Files))
	for name := range repo.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	entry := func(n string) map[string]any {
		f := repo.Files[n]
		e := map[string]any{"type": "file", "oid": f.GitID, "size": len(f.Data), "path": n}
		if f.LFS {
			e["lfs"] = map[string]any{"oid": f.SHA256, "size": len(f.Data), "pointerSize": 134}
		}
		return e
	}
	switch kind {
	case "paths-info":
		var body struct {
			Paths []string `json:"paths"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "POST a JSON body with paths", http.StatusBadRequest)
			return
		}
		page := []map[string]any{}
		for _, n := range body.Paths {
			if repo.Files[n] != nil {
				page = append(page, entry(n))
			}
		}
		writeJSON(w, page)
	case "revision":
		siblings := []map[string]string{}
		for _, n := range names {
			siblings = append(siblings, map[string]string{"rfilename": n})
		}
		writeJSON(w, map[string]any{"id": repo.ID, "sha": repo.Commit, "siblings": siblings})
	case "tree":
		start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		end := min(start+h.PageSize, len(names))
		page := []map[string]any{}
		for _, n := range names[start:end] {
			page = append(page, entry(n))
		}
		if end < len(names) {
			next := *r.URL
			q := next.Query()
			q.Set("cursor", strconv.Itoa(end))
			next.RawQuery = q.Encode()
			w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, h.URL, next.RequestURI()))
		}
		writeJSON(w, page)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (h *Hub) serveResolve(w http.ResponseWriter, r *http.Request, rest string) {
	repo, tail, ok := h.repo(w, r, rest)
	if !ok {
		return
	}
	tail = strings.TrimPrefix(tail, "resolve/")
	rev, path, _ := strings.Cut(tail, "/")
	f := repo.Files[path]
	h.mu.Lock()
	h.resolves[path]++
	// A status fault answers the resolve request; the body faults of an
	// LFS file wait for its CDN request.
	var fault *Fault
	if g := h.faults[path]; g != nil && (g.Status != 0 || (f != nil && !f.LFS)) {
		fault = takeFault(g)
	}
	h.mu.Unlock()
	if !revisionOK(w, repo, rev) {
		return
	}
	if f == nil {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	if fault != nil && fault.Status != 0 {
		http.Error(w, http.StatusText(fault.Status), fault.Status)
		return
	}
	w.Header().Set("X-Repo-Commit", repo.Commit)
	if f.LFS {
		w.Header().Set("X-Linked-Etag", `"`+f.SHA256+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
		w.Header().Set("Location", fmt.Sprintf("%s/cdn/%s?file=%s&expires=%d", h.URL, f.SHA256, path, time.Now().Add(time.Hour).Unix()))
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+f.GitID+`"`)
	h.serveBody(w, r, path, f, fault)
}

func (h *Hub) serveCDN(w http.ResponseWriter, r *http.Request, sha string) {
	path := r.URL.Query().Get("file")
	h.mu.Lock()
	h.cdn[path]++
	var f *File
	for _, repo := range h.repos {
		if g := repo.Files[path]; g != nil && g.SHA256 == sha {
			f = g
		}
	}
	var fault *Fault
	if g := h.faults[path]; g != nil && g.Status == 0 {
		fault = takeFault(g)
	}
	h.mu.Unlock()
	if f == nil {
		http.Error(w, "AccessDenied", http.StatusForbidden) // what S3 answers for an unknown key
		return
	}
	w.Header().Set("ETag", `"`+sha+`"`)
	h.serveBody(w, r, path, f, fault)
}

// serveBody sends a file's contents with Range support, through the fault.
func (h *Hub) serveBody(w http.ResponseWriter, r *http.Request, path string, f *File, fault *Fault) {
	h.mu.Lock()
	h.ranges[path] = append(h.ranges[path], r.Header.Get("Range"))
	speed := 0
	if g := h.faults[path]; g != nil {
		speed = g.BytesPerSecond
	}
	h.mu.Unlock()
	if h.BeforeBody != nil {
		h.BeforeBody(path)
	}
	data := f.Data
	if fault != nil && fault.Corrupt {
		data = bytes.Clone(data)
		data[len(data)/2] ^= 0x01
	}
	fw := &faultyWriter{ResponseWriter: w, hub: h, path: path, speed: speed, gone: r.Context().Done()}
	if fault != nil {
		fw.dropAfter, fw.stallAfter = fault.DropAfter, fault.StallAfter
		if fault.IgnoreRange {
			r.Header.Del("Range")
		}
	}
	http.ServeContent(fw, r, "", time.Time{}, bytes.NewReader(data))
}

// faultyWriter counts, throttles and cuts off a response body.
type faultyWriter struct {
	http.ResponseWriter
	hub        *Hub
	path       string
	speed      int
	dropAfter  int64
	stallAfter int64
	gone       <-chan struct{} // the client went away
	written    int64
}

func (w *faultyWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		chunk := b
		if w.speed > 0 && len(chunk) > 4096 {
			chunk = chunk[:4096]
		}
		if w.dropAfter > 0 && w.written+int64(len(chunk)) > w.dropAfter {
			chunk = chunk[:w.dropAfter-w.written]
		}
		if w.stallAfter > 0 && w.written+int64(len(chunk)) > w.stallAfter {
			chunk = chunk[:w.stallAfter-w.written]
		}
		m, err := w.ResponseWriter.Write(chunk)
		n += m
		w.written += int64(m)
		w.hub.mu.Lock()
		w.hub.sent[w.path] += int64(m)
		w.hub.mu.Unlock()
		if err != nil {
			return n, err
		}
		if w.stallAfter > 0 && w.written >= w.stallAfter {
			if fl, ok := w.ResponseWriter.(http.Flusher); ok {
				fl.Flush()
			}
			<-w.gone
			panic(http.ErrAbortHandler)
		}
		if w.dropAfter > 0 && w.written >= w.dropAfter {
			if fl, ok := w.ResponseWriter.(http.Flusher); ok {
				fl.Flush()
			}
			panic(http.ErrAbortHandler) // net/http closes the connection mid-body
		}
		if w.speed > 0 {
			if fl, ok := w.ResponseWriter.(http.Flusher); ok {
				fl.Flush()
			}
			time.Sleep(time.Duration(float64(m) / float64(w.speed) * float64(time.Second)))
		}
		b = b[len(chunk):]
	}
	return n, nil
}
