// Package prefixstore keeps sequence snapshots on disk, so that a prefix
// the engine read once (a long document, an agent's system prompt and
// tools) is read back after a restart instead of computed again.
//
// A snapshot is one file in the store's folder (DefaultDir:
// os.UserCacheDir()/suzuran/prefix, ~/Library/Caches/suzuran/prefix on
// macOS, $XDG_CACHE_HOME or ~/.cache on Linux), named by its token count
// and a hash of its key: the space (the model's identity, the engine's
// state format version and the backend's state format, see Space) and the
// prefix's token ids, which the store treats as opaque integers. The file
// holds
//
//	magic "SUZSNAP\n", the format version (FormatVersion),
//	the space, the token ids, the backend's bytes,
//	a CRC-32C (Castagnoli) of everything before it
//
// (a checksum against a damaged disk or a cut-short file, not against
// someone who writes into the user's cache folder; CRC-32C runs at
// memory speed where SHA-256 would halve the read speed).
//
// and is written off the answering path (Save queues it for a goroutine
// of the store's), to a temporary file that is synced and then renamed, so
// that a crash or a full disk never leaves a file under a snapshot's name
// that is not whole. A file that is cut short, fails its checksum, holds
// another space or other tokens than its name says, or was written by
// another format version is ignored, logged and deleted, and the caller
// computes the prefix: never a wrong state.
//
// The folder is bounded (Options.Limit): after each write the least
// recently used files (by modification time, which a load refreshes) are
// deleted until the rest fits.
package prefixstore

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/suzuran-app/suzuran/engine/internal/stateio"
)

// FormatVersion is the version of the store's file layout; files of
// another version are deleted when the store opens.
const FormatVersion = 1

// DefaultLimit is the folder's size limit when Options.Limit is 0: 8 GiB,
// room for about ten 20,000-token documents at the real model's shapes on
// the CPU backend (f32 KV) and twice that with a bf16 KV cache, a small
// share of a Mac's disk.
const DefaultLimit int64 = 8 << 30

const (
	magic   = "SUZSNAP\n"
	suffix  = ".snap"
	tmpMark = ".tmp-"
	sumSize = 4
	// maxQueued is how many snapshots may wait for the writer; more are
	// dropped (they stay in memory), so that a burst of long prompts does
	// not hold many states in memory at once for the disk's sake.
	maxQueued = 2
	// staleTemp is how old a temporary file must be before Open deletes
	// it as left by a crashed write (a younger one may be another
	// process's write in progress).
	staleTemp = time.Hour
	// maxSpace bounds the space string a header may claim.
	maxSpace = 4096
	maxIDs   = 1 << 24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DefaultDir is the store's folder under the user cache directory.
func DefaultDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache folder for the prefix store: %w", err)
	}
	return filepath.Join(base, "suzuran", "prefix"), nil
}

// Options configure a Store.
type Options struct {
	// Dir is the folder; "" is DefaultDir.
	Dir string
	// Limit bounds the folder's snapshots in bytes; 0 is DefaultLimit.
	Limit int64
	// Log is told what the store ignored or could not do (a snapshot that
	// failed its checksum, a full disk); nil is the standard logger.
	Log func(msg string)
}

// Store is a folder of snapshots. Its methods are safe for concurrent use.
type Store struct {
	dir   string
	limit int64
	logf  func(string)

	mu      sync.Mutex
	entries map[string]*entry // by file name
	used    int64
	gen     int // counts Clear calls: a write begun before one is dropped
	queued  int
	closed  bool
	jobs    chan job
	done    chan struct{}
	// writing is closed when the queue is empty and no write runs.
	idle *sync.Cond
	busy bool
}

type entry struct {
	name   string
	tokens int
	size   int64
	used   time.Time
	// owners are the conversations that saved or loaded it (Save, Load),
	// kept in a file beside it (ownersSuffix), one a line.
	owners map[string]bool
}

type job struct {
	space  string
	tokens []int
	owner  string
	write  func(io.Writer) error
	gen    int
}

// ownersSuffix names the file beside a snapshot that lists its owners.
const ownersSuffix = ".owners"

// Open opens (making it when missing) the folder, lists its snapshots,
// and deletes the files of other format versions and temporary files left
// by a write that never finished.
func Open(o Options) (*Store, error) {
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the prefix store's folder: %w", err)
	}
	s := &Store{dir: dir, limit: o.Limit, logf: o.Log, entries: map[string]*entry{},
		jobs: make(chan job, maxQueued), done: make(chan struct{})}
	if s.limit <= 0 {
		s.limit = DefaultLimit
	}
	if s.logf == nil {
		s.logf = func(msg string) { log.Print(msg) }
	}
	s.idle = sync.NewCond(&s.mu)
	if err := s.scan(); err != nil {
		return nil, err
	}
	go s.writer()
	return s, nil
}

// Dir is the store's folder.
func (s *Store) Dir() string { return s.dir }

// Limit is the folder's size limit in bytes.
func (s *Store) Limit() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit
}

// SetLimit changes the size limit (0: DefaultLimit), deleting the least
// recently used snapshots that no longer fit.
func (s *Store) SetLimit(limit int64) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = limit
	s.evict("")
}

func (s *Store) log(format string, args ...any) {
	s.logf("prefix store: " + fmt.Sprintf(format, args...))
}

// scan lists the folder.
func (s *Store) scan() error {
	list, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("reading the prefix store's folder: %w", err)
	}
	for _, d := range list {
		name := d.Name()
		path := filepath.Join(s.dir, name)
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if strings.Contains(name, tmpMark) {
			if time.Since(info.ModTime()) > staleTemp {
				os.Remove(path)
			}
			continue
		}
		n, ok := parseName(name)
		if !ok {
			continue
		}
		if v, err := fileVersion(path); err != nil || v != FormatVersion {
			if err == nil {
				err = fmt.Errorf("written by format version %d, this build reads %d", v, FormatVersion)
			}
			s.log("deleting %s: %v", name, err)
			os.Remove(path)
			continue
		}
		e := &entry{name: name, tokens: n, size: info.Size(), used: info.ModTime()}
		if data, err := os.ReadFile(path + ownersSuffix); err == nil {
			for _, o := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				if o != "" {
					e.addOwner(o)
				}
			}
		}
		s.entries[name] = e
		s.used += info.Size()
	}
	return nil
}

func (e *entry) addOwner(o string) {
	if e.owners == nil {
		e.owners = map[string]bool{}
	}
	e.owners[o] = true
}

// own records that owner used the entry. s.mu is held.
func (s *Store) own(e *entry, owner string) {
	if owner == "" || e.owners[owner] {
		return
	}
	e.addOwner(owner)
	f, err := os.OpenFile(filepath.Join(s.dir, e.name+ownersSuffix), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		s.log("recording who uses %s: %v", e.name, err)
		return
	}
	fmt.Fprintln(f, owner)
	f.Close()
}

// DeleteOwner forgets that owner used any snapshot, and deletes the
// snapshots that only it used (those that no owner is recorded for, such as
// the API's, stay); it returns how many it deleted.
func (s *Store) DeleteOwner(owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for name, e := range s.entries {
		if !e.owners[owner] {
			continue
		}
		delete(e.owners, owner)
		if len(e.owners) == 0 {
			s.drop(name)
			n++
			continue
		}
		var b strings.Builder
		for o := range e.owners {
			b.WriteString(o + "\n")
		}
		os.WriteFile(filepath.Join(s.dir, name+ownersSuffix), []byte(b.String()), 0o600)
	}
	return n
}

// fileVersion reads a file's magic and format version.
func fileVersion(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var head [len(magic) + 8]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return 0, errors.New("cut short before its header")
	}
	if string(head[:len(magic)]) != magic {
		return 0, errors.New("not a snapshot file")
	}
	return int(binary.LittleEndian.Uint64(head[len(magic):])), nil
}

// name is the file name of tokens in space: the token count, then the
// first 128 bits of the key's hash.
func name(n int, sum []byte) string {
	return strconv.Itoa(n) + "-" + hex.EncodeToString(sum[:16]) + suffix
}

func parseName(name string) (int, bool) {
	base, ok := strings.CutSuffix(name, suffix)
	if !ok {
		return 0, false
	}
	count, sum, ok := strings.Cut(base, "-")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || n <= 0 || len(sum) != 32 {
		return 0, false
	}
	return n, true
}

// keyHash starts the hash of a key: the space, then the ids one by one.
func keyHash(space string) hash.Hash {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(space)))
	h.Write(b[:])
	h.Write([]byte(space))
	return h
}

func writeIDs(h hash.Hash, ids []int) {
	b := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(id)))
	}
	h.Write(b)
}

// Name is the file name a snapshot of tokens in space has.
func Name(space string, tokens []int) string {
	h := keyHash(space)
	writeIDs(h, tokens)
	return name(len(tokens), h.Sum(nil))
}

// Save queues the snapshot of tokens in space, used by owner ("" for
// none: see DeleteOwner), for writing: write writes
// the backend's bytes (it runs on the store's goroutine, after Save has
// returned, so what it reads must not change meanwhile). Save never
// waits for the disk; when the queue is full or the store is closed the
// snapshot is not written (a log line says so).
func (s *Store) Save(space string, tokens []int, owner string, write func(io.Writer) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if e, ok := s.entries[Name(space, tokens)]; ok {
		s.own(e, owner)
		return
	}
	if s.queued >= maxQueued {
		s.log("not keeping a snapshot of %d tokens on disk: %d writes are waiting already", len(tokens), s.queued)
		return
	}
	s.queued++
	s.busy = true
	s.jobs <- job{space: space, tokens: slices.Clone(tokens), owner: owner, write: write, gen: s.gen}
}

// Own records that owner used the snapshot of tokens in space, when
// the store holds it.
func (s *Store) Own(space string, tokens []int, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[Name(space, tokens)]; ok {
		s.own(e, owner)
	}
}

// Has reports whether a snapshot of exactly tokens in space is listed.
func (s *Store) Has(space string, tokens []int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.entries[Name(space, tokens)]
	return ok
}

// writer writes the queued snapshots one at a time.
func (s *Store) writer() {
	defer close(s.done)
	for j := range s.jobs {
		s.writeOne(j)
		s.mu.Lock()
		s.queued--
		if s.queued == 0 {
			s.busy = false
			s.idle.Broadcast()
		}
		s.mu.Unlock()
	}
}

// Wait blocks until no write is queued or running.
func (s *Store) Wait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.busy {
		s.idle.Wait()
	}
}

// writeOne writes one snapshot to a temporary file, syncs it, renames it
// to its name and syncs the folder; any failure removes the temporary file
// and is logged.
func (s *Store) writeOne(j job) {
	fname := Name(j.space, j.tokens)
	f, err := os.CreateTemp(s.dir, fname+tmpMark+"*")
	if err != nil {
		s.log("not keeping a snapshot of %d tokens: %v", len(j.tokens), err)
		return
	}
	tmp := f.Name()
	size, err := writeFile(f, j)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	s.mu.Lock()
	stale := j.gen != s.gen
	s.mu.Unlock()
	if err == nil && size > s.Limit() {
		err = fmt.Errorf("its %d MB are more than the store's limit of %d MB", size>>20, s.Limit()>>20)
	}
	if err == nil && !stale {
		err = os.Rename(tmp, filepath.Join(s.dir, fname))
	}
	if err != nil || stale {
		os.Remove(tmp)
		if err != nil {
			s.log("not keeping a snapshot of %d tokens: %v", len(j.tokens), err)
		}
		return
	}
	syncDir(s.dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.entries[fname]; ok {
		s.used -= old.size
	}
	e := &entry{name: fname, tokens: len(j.tokens), size: size, used: time.Now()}
	os.Remove(filepath.Join(s.dir, fname+ownersSuffix))
	s.own(e, j.owner)
	s.entries[fname] = e
	s.used += size
	s.evict(fname)
}

// writeFile writes j's file to f and returns its size.
func writeFile(f *os.File, j job) (int64, error) {
	bw := bufio.NewWriterSize(f, 1<<20)
	sum := crc32.New(castagnoli)
	cw := &countWriter{w: io.MultiWriter(bw, sum)}
	io.WriteString(cw, magic)
	w := stateio.NewWriter(cw)
	w.Uint64(FormatVersion)
	w.String(j.space)
	w.Ints(j.tokens)
	if err := w.Err(); err != nil {
		return 0, err
	}
	if err := j.write(cw); err != nil {
		return 0, err
	}
	if cw.err != nil {
		return 0, cw.err
	}
	if _, err := bw.Write(sum.Sum(nil)); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	return cw.n + sumSize, nil
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// evict deletes the least recently used files, never keep, until the rest
// fits the limit. s.mu is held.
func (s *Store) evict(keep string) {
	for s.used > s.limit {
		var oldest *entry
		for _, e := range s.entries {
			if e.name != keep && (oldest == nil || e.used.Before(oldest.used)) {
				oldest = e
			}
		}
		if oldest == nil {
			break
		}
		s.drop(oldest.name)
	}
}

// drop deletes a file and its entry. s.mu is held.
func (s *Store) drop(name string) {
	if e, ok := s.entries[name]; ok {
		s.used -= e.size
		delete(s.entries, name)
	}
	os.Remove(filepath.Join(s.dir, name))
	os.Remove(filepath.Join(s.dir, name+ownersSuffix))
}

// Load finds the longest stored prefix of prompt in space with more than
// min and at most max tokens, and hands its backend bytes and its tokens
// to read, which makes the state from them. Load returns the prefix's length once read
// has succeeded and the file's checksum matched; a file that fails
// (read's error included) is logged and deleted and the next shorter one
// is tried. 0: none.
func (s *Store) Load(space string, prompt []int, min, max int, owner string, read func(r io.Reader, tokens []int) error) int {
	for _, c := range s.candidates(space, prompt, min, max) {
		err := s.loadFile(c.name, space, prompt[:c.tokens], read)
		if err == nil {
			s.mu.Lock()
			if e, ok := s.entries[c.name]; ok {
				s.own(e, owner)
			}
			s.mu.Unlock()
			return c.tokens
		}
		if errors.Is(err, os.ErrNotExist) {
			// Another process's store removed it.
			s.mu.Lock()
			delete(s.entries, c.name)
			s.mu.Unlock()
			continue
		}
		s.log("ignoring and deleting %s (a prefix of %d tokens): %v", c.name, c.tokens, err)
		s.mu.Lock()
		s.drop(c.name)
		s.mu.Unlock()
	}
	return 0
}

// candidates are the listed files whose name is that of a prefix of
// prompt in space, longest first.
func (s *Store) candidates(space string, prompt []int, min, max int) []entry {
	s.mu.Lock()
	lengths := map[int]bool{}
	for _, e := range s.entries {
		if e.tokens > min && e.tokens <= max && e.tokens <= len(prompt) {
			lengths[e.tokens] = true
		}
	}
	s.mu.Unlock()
	if len(lengths) == 0 {
		return nil
	}
	ns := make([]int, 0, len(lengths))
	for n := range lengths {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	h := keyHash(space)
	var names []entry
	done := 0
	for _, n := range ns {
		writeIDs(h, prompt[done:n])
		done = n
		names = append(names, entry{name: name(n, h.Sum(nil)), tokens: n})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []entry
	for i := len(names) - 1; i >= 0; i-- {
		if _, ok := s.entries[names[i].name]; ok {
			out = append(out, names[i])
		}
	}
	return out
}

// loadFile reads one file, checking its header against the key, and
// marks it used.
func (s *Store) loadFile(fname, space string, tokens []int, read func(io.Reader, []int) error) error {
	path := filepath.Join(s.dir, fname)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	sum := crc32.New(castagnoli)
	body := io.LimitReader(f, info.Size()-sumSize)
	br := bufio.NewReaderSize(io.TeeReader(body, sum), 1<<20)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(br, head); err != nil || string(head) != magic {
		return errors.New("not a snapshot file, or cut short")
	}
	r := stateio.NewReader(br)
	if v := r.Uint64(); r.Err() == nil && v != FormatVersion {
		return fmt.Errorf("written by format version %d, this build reads %d", v, FormatVersion)
	}
	fileSpace := r.String("the space", maxSpace)
	if r.Err() == nil && fileSpace != space {
		return fmt.Errorf("written for %q, not %q", fileSpace, space)
	}
	ids := r.Ints("the token ids", len(tokens), maxIDs)
	if r.Err() != nil {
		return fmt.Errorf("header: %w", r.Err())
	}
	if !slices.Equal(ids, tokens) {
		return errors.New("holds other tokens than its name says")
	}
	if err := read(br, tokens); err != nil {
		return fmt.Errorf("reading the state: %w", err)
	}
	if n, _ := io.Copy(io.Discard, br); n > 0 {
		return fmt.Errorf("%d bytes past the state", n)
	}
	want := make([]byte, sumSize)
	if _, err := io.ReadFull(f, want); err != nil {
		return errors.New("cut short before its checksum")
	}
	if !bytes.Equal(sum.Sum(nil), want) {
		return errors.New("checksum mismatch")
	}
	now := time.Now()
	os.Chtimes(path, now, now)
	s.mu.Lock()
	if e, ok := s.entries[fname]; ok {
		e.used = now
	}
	s.mu.Unlock()
	return nil
}

// Usage is the space the store's snapshots take.
type Usage struct {
	Bytes     int64
	Snapshots int
	Limit     int64
}

// Usage says how much the folder holds.
func (s *Store) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Usage{Bytes: s.used, Snapshots: len(s.entries), Limit: s.limit}
}

// Clear deletes every snapshot; a write under way is dropped.
func (s *Store) Clear() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	var first error
	for name := range s.entries {
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
		os.Remove(filepath.Join(s.dir, name+ownersSuffix))
		s.used -= s.entries[name].size
		delete(s.entries, name)
	}
	return first
}

// Close waits for the write under way and those queued, then stops the
// writer.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	close(s.jobs)
	s.mu.Unlock()
	<-s.done
	return nil
}
