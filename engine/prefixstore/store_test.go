package prefixstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logLines collects a store's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *logLines) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func open(t *testing.T, dir string, limit int64) (*Store, *logLines) {
	t.Helper()
	logs := &logLines{}
	s, err := Open(Options{Dir: dir, Limit: limit, Log: logs.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// payload is a state of n bytes that depends on the tokens.
func payload(tokens []int, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + len(tokens) + tokens[len(tokens)-1])
	}
	return b
}

func saver(p []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(p); return err }
}

// load reads the longest stored prefix of prompt, checking that its state
// is the one saved for it.
func load(t *testing.T, s *Store, space string, prompt []int, n int) int {
	t.Helper()
	return loadWithin(s, space, prompt, 0, len(prompt), n, true)
}

// loadWithin reads a state of n bytes as a backend would, checking that
// it is the one saved when verify is set; without, only the store's own
// checks (the checksum, the header) stand between a damaged file and the
// caller.
func loadWithin(s *Store, space string, prompt []int, min, max, n int, verify bool) int {
	return s.Load(space, prompt, min, max, "", func(r io.Reader, tokens []int) error {
		got := make([]byte, n)
		if _, err := io.ReadFull(r, got); err != nil {
			return err
		}
		if verify && !bytes.Equal(got, payload(tokens, n)) {
			return fmt.Errorf("state of %d tokens differs from the one saved", len(tokens))
		}
		return nil
	})
}

func seq(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*31 + 5) % 1000
	}
	return ids
}

const space = "model=m;engine=1;backend=test"

// TestLongestPrefix: of the stored prefixes of a prompt the longest loads;
// one of another space or other tokens is never found; a new store on the
// same folder (a restart) finds them again.
func TestLongestPrefix(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, dir, 0)
	prompt := seq(300)
	for _, n := range []int{50, 200, 120} {
		s.Save(space, prompt[:n], "", saver(payload(prompt[:n], 1000)))
		s.Wait()
	}
	other := append(seq(150), 1)
	s.Save("model=other;engine=1;backend=test", prompt[:250], "", saver(payload(prompt[:250], 1000)))
	s.Save(space, other, "", saver(payload(other, 1000)))
	s.Wait()
	if got := load(t, s, space, prompt, 1000); got != 200 {
		t.Fatalf("loaded a prefix of %d tokens, want the longest stored, 200", got)
	}
	if got := loadWithin(s, space, prompt, 0, 199, 1000, true); got != 120 {
		t.Fatalf("with at most 199 tokens loaded %d, want 120", got)
	}
	if got := loadWithin(s, space, prompt, 120, 300, 1000, true); got != 200 {
		t.Fatalf("with more than 120 tokens loaded %d, want 200", got)
	}
	s.Close()
	again, _ := open(t, dir, 0)
	if u := again.Usage(); u.Snapshots != 5 {
		t.Fatalf("a reopened store lists %d snapshots, want 5", u.Snapshots)
	}
	if got := load(t, again, space, prompt, 1000); got != 200 {
		t.Fatalf("after a restart loaded %d tokens, want 200", got)
	}
}

// TestDamagedFilesAreIgnored: a file cut short, one with a flipped byte,
// one written for another space and one of an older format version are
// each ignored with a log line and deleted, and the next shorter prefix
// loads instead.
func TestDamagedFilesAreIgnored(t *testing.T) {
	prompt := seq(100)
	damage := map[string]func(t *testing.T, dir, path string){
		"cut short": func(t *testing.T, dir, path string) {
			info, _ := os.Stat(path)
			if err := os.Truncate(path, info.Size()/2); err != nil {
				t.Fatal(err)
			}
		},
		"flipped byte": func(t *testing.T, dir, path string) {
			data, _ := os.ReadFile(path)
			data[len(data)-100] ^= 0x10
			os.WriteFile(path, data, 0o600)
		},
		"another model": func(t *testing.T, dir, path string) {
			// A file written for another model, under this key's name.
			s, _ := open(t, t.TempDir(), 0)
			s.Save("model=other;engine=1;backend=test", prompt[:80], "", saver(payload(prompt[:80], 1000)))
			s.Wait()
			data, err := os.ReadFile(filepath.Join(s.Dir(), Name("model=other;engine=1;backend=test", prompt[:80])))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, data, 0o600)
		},
		"older format": func(t *testing.T, dir, path string) {
			data, _ := os.ReadFile(path)
			binary.LittleEndian.PutUint64(data[len(magic):], FormatVersion-1)
			binary.BigEndian.PutUint32(data[len(data)-sumSize:], crc32.Checksum(data[:len(data)-sumSize], castagnoli))
			os.WriteFile(path, data, 0o600)
		},
	}
	for what, spoil := range damage {
		t.Run(what, func(t *testing.T) {
			for _, reopen := range []bool{false, true} {
				dir := t.TempDir()
				s, logs := open(t, dir, 0)
				for _, n := range []int{40, 80} {
					s.Save(space, prompt[:n], "", saver(payload(prompt[:n], 1000)))
					s.Wait()
				}
				path := filepath.Join(dir, Name(space, prompt[:80]))
				spoil(t, dir, path)
				if reopen {
					s.Close()
					s, logs = open(t, dir, 0)
				}
				if got := loadWithin(s, space, prompt, 0, len(prompt), 1000, false); got != 40 {
					t.Fatalf("reopened %v: loaded %d tokens, want the undamaged 40", reopen, got)
				}
				if !logs.has(Name(space, prompt[:80])) {
					t.Errorf("reopened %v: no log line names the damaged file: %q", reopen, logs.lines)
				}
				if _, err := os.Stat(path); !os.IsNotExist(err) {
					t.Errorf("reopened %v: the damaged file is still there (%v)", reopen, err)
				}
				t.Logf("reopened %v: %q", reopen, logs.lines)
			}
		})
	}
}

// TestSizeLimit writes a loop of distinct prefixes into a store bounded to
// five of them: after each write the folder holds at most the limit, the
// newest is there, and a snapshot loaded in between outlives older ones.
func TestSizeLimit(t *testing.T) {
	dir := t.TempDir()
	const size = 10000
	s, _ := open(t, dir, 5*size+5*400)
	kept := append(seq(30), 999)
	s.Save(space, kept, "", saver(payload(kept, size)))
	s.Wait()
	for i := range 40 {
		p := append(seq(30), i)
		s.Save(space, p, "", saver(payload(p, size)))
		s.Wait()
		var onDisk int64
		list, _ := os.ReadDir(dir)
		for _, d := range list {
			info, _ := d.Info()
			onDisk += info.Size()
		}
		if u := s.Usage(); u.Bytes > u.Limit || onDisk > u.Limit || u.Bytes != onDisk {
			t.Fatalf("after %d writes the store counts %d bytes and the folder holds %d, limit %d", i+1, u.Bytes, onDisk, u.Limit)
		}
		if load(t, s, space, p, size) != len(p) {
			t.Fatalf("write %d: the newest snapshot does not load", i)
		}
		if load(t, s, space, kept, size) != len(kept) {
			t.Fatalf("write %d: the snapshot loaded after every write was evicted", i)
		}
		time.Sleep(2 * time.Millisecond) // the files' clock: distinct modification times order the eviction under test
	}
	if first := append(seq(30), 0); load(t, s, space, first, size) != 0 {
		t.Fatal("the first of 40 snapshots survived a limit of five")
	}
	if u := s.Usage(); u.Snapshots != 5 {
		t.Fatalf("the store holds %d snapshots, five fit", u.Snapshots)
	}
	// A snapshot larger than the whole limit is not kept, and the others
	// stay.
	huge := append(seq(30), 5000)
	s.Save(space, huge, "", saver(payload(huge, 6*size)))
	s.Wait()
	if s.Has(space, huge) || s.Usage().Snapshots != 5 || s.Usage().Bytes > s.Usage().Limit {
		t.Fatalf("a snapshot over the limit: kept %v, store %+v", s.Has(space, huge), s.Usage())
	}
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if list, _ := os.ReadDir(dir); len(list) != 0 || s.Usage().Bytes != 0 {
		t.Fatalf("after Clear the folder holds %d files", len(list))
	}
}

// TestKilledWhileWriting kills a process with SIGKILL while it writes a
// snapshot: a store opened on its folder afterwards loads nothing.
func TestKilledWhileWriting(t *testing.T) {
	if dir := os.Getenv("PREFIXSTORE_CHILD_DIR"); dir != "" {
		s, err := Open(Options{Dir: dir})
		if err != nil {
			os.Exit(3)
		}
		p := seq(64)
		s.Save(space, p, "", func(w io.Writer) error {
			data := payload(p, 64<<20)
			for i := 0; i < len(data); i += 1 << 20 {
				if _, err := w.Write(data[i : i+1<<20]); err != nil {
					return err
				}
				if i == 4<<20 {
					os.WriteFile(filepath.Join(dir, "..", "writing"), nil, 0o600)
				}
				time.Sleep(20 * time.Millisecond) // a slow writer, so that the kill comes mid-write: the case under test
			}
			return nil
		})
		s.Wait()
		os.Exit(0)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "prefix")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWhileWriting$")
	cmd.Env = append(os.Environ(), "PREFIXSTORE_CHILD_DIR="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second) // generous: a loaded machine
	for {
		if _, err := os.Stat(filepath.Join(root, "writing")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the child never started writing")
		}
		time.Sleep(5 * time.Millisecond) // another process writes the marker, with no event across: the folder is read again
	}
	cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the child was not killed mid-write: %v", err)
	}
	list, _ := os.ReadDir(dir)
	var names []string
	for _, d := range list {
		names = append(names, d.Name())
	}
	s, _ := open(t, dir, 0)
	if u := s.Usage(); u.Snapshots != 0 {
		t.Fatalf("after the kill the store lists %d snapshots (%v)", u.Snapshots, names)
	}
	if got := load(t, s, space, seq(64), 64<<20); got != 0 {
		t.Fatalf("a snapshot of %d tokens loaded after the writer was killed", got)
	}
	t.Logf("left in the folder: %v (temporary files older than %v are deleted at open)", names, staleTemp)
}

// TestFullDisk writes into a 1 MiB tmpfs: a snapshot that does not fit
// fails quietly (a log line, no file), and one that fits is written after.
func TestFullDisk(t *testing.T) {
	dir := mountSmallDisk(t)
	s, logs := open(t, dir, 0)
	big := seq(200)
	s.Save(space, big, "", saver(payload(big, 2<<20)))
	s.Wait()
	if list, _ := os.ReadDir(dir); len(list) != 0 {
		t.Fatalf("a snapshot larger than the disk left %d files", len(list))
	}
	if !logs.has("no space left") {
		t.Fatalf("no log line says the disk is full: %q", logs.lines)
	}
	if load(t, s, space, big, 2<<20) != 0 {
		t.Fatal("a snapshot that did not fit loads")
	}
	small := seq(20)
	s.Save(space, small, "", saver(payload(small, 1000)))
	s.Wait()
	if load(t, s, space, small, 1000) != 20 {
		t.Fatal("after a full disk, a snapshot that fits was not kept")
	}
}

// mountSmallDisk mounts a 1 MiB tmpfs for the test, which needs root.
func mountSmallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs to fill needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// TestDeleteOwner: deleting a conversation deletes the snapshots only it
// used, keeps those another conversation used too (and forgets the
// deleted one there), and keeps those no conversation is recorded for;
// the record outlives a restart.
func TestDeleteOwner(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, dir, 0)
	a, b, c := append(seq(40), 1), append(seq(40), 2), append(seq(40), 3)
	s.Save(space, a, "conversation:1", saver(payload(a, 100)))
	s.Save(space, b, "conversation:1", saver(payload(b, 100)))
	s.Wait()
	s.Save(space, c, "", saver(payload(c, 100)))
	s.Wait()
	if loadWithin(s, space, b, 0, len(b), 100, true) != len(b) {
		t.Fatal("b does not load")
	}
	s.Own(space, b, "conversation:2")
	s.Close()
	s, _ = open(t, dir, 0)
	if n := s.DeleteOwner("conversation:1"); n != 1 {
		t.Fatalf("deleting conversation 1 deleted %d snapshots, want the one only it used", n)
	}
	if s.Has(space, a) || !s.Has(space, b) || !s.Has(space, c) {
		t.Fatalf("after deleting conversation 1: a %v, b %v, c %v; want only b and c", s.Has(space, a), s.Has(space, b), s.Has(space, c))
	}
	if n := s.DeleteOwner("conversation:2"); n != 1 || s.Has(space, b) {
		t.Fatalf("deleting conversation 2 deleted %d, b still listed %v", n, s.Has(space, b))
	}
	if list, _ := filepath.Glob(filepath.Join(dir, "*")); len(list) != 1 {
		t.Fatalf("left in the folder: %v, want c's snapshot alone", list)
	}
}
