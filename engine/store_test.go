package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/prefixstore"
)

// storeLog collects a store's log lines.
type storeLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *storeLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *storeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// openStore opens a store on dir that logs into the returned log.
func openStore(t *testing.T, dir string) (*prefixstore.Store, *storeLog) {
	t.Helper()
	logs := &storeLog{}
	s, err := prefixstore.Open(prefixstore.Options{Dir: dir, Log: logs.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// agentRequest is a conversation as an agent starts one: a long system
// prompt and tools, then the user's first question.
func agentRequest(t *testing.T, question string) chat.RenderRequest {
	return agentRequestOf(t, 40, 3, question)
}

// agentRequestOf is agentRequest with a system prompt of the given number
// of rules (about 25 tokens each) and of tools (about 100).
func agentRequestOf(t *testing.T, rules, ntools int, question string) chat.RenderRequest {
	t.Helper()
	var system strings.Builder
	for i := range rules {
		fmt.Fprintf(&system, "Rule %d: read the files before you change them, and say what you changed. ", i)
	}
	var tools []map[string]any
	for _, name := range []string{"read_file", "write_file", "run_command"}[:ntools] {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": name, "description": "Does " + strings.ReplaceAll(name, "_", " ") + " in the project.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"path": map[string]any{"type": "string", "description": "a path in the project"}}}}})
	}
	off := false
	body, _ := json.Marshal(map[string]any{
		"messages": []map[string]any{{"role": "system", "content": system.String()}, {"role": "user", "content": question}},
		"tools":    tools, "add_generation_prompt": true, "enable_thinking": off,
	})
	r, err := chat.DecodeRenderRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// chatAnswer submits a conversation and returns its greedy answer's ids
// (answerTokens of them at most) and stats.
func chatAnswer(t *testing.T, e *Engine, r chat.RenderRequest) ([]int, Stats, chat.Prompt) {
	t.Helper()
	p, err := e.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, st := collect(t, e, Request{Prompt: p.IDs, Checkpoints: p.Checkpoints, MaxTokens: answerTokens(e)})
	return ids, *st, p
}

// answerTokens bounds the answers of these tests: a few on the emulator,
// whose decode steps take most of a second here.
func answerTokens(e *Engine) int {
	if strings.HasPrefix(e.BackendName(), "cpu") {
		return 12
	}
	return 3
}

// TestSharedSystemPromptFoundAgain: two conversations with the same long
// system prompt and tools and different first questions; the second reads
// only what differs (cached_tokens ≥ the shared system turn), in memory and
// after a restart (a new engine and store on the same folder), with the
// answer of an engine that caches nothing.
func TestSharedSystemPromptFoundAgain(t *testing.T) {
	for _, backend := range backendsUnderTest() {
		t.Run(backend, func(t *testing.T) {
			// The emulator takes seconds a pass here: a short system
			// prompt without tools, and fewer rounds, keep its run short.
			rules, ntools, min := 40, 3, 64
			if backend != "cpu" {
				rules, ntools, min = 2, 0, 16
			}
			request := func(q string) chat.RenderRequest { return agentRequestOf(t, rules, ntools, q) }
			dir := t.TempDir()
			store, _ := openStore(t, dir)
			lo := LoadOptions{Store: store, StoreMinTokens: min}
			e := loadDemo(t, backend, lo)
			fresh := loadDemo(t, backend, LoadOptions{CacheBytes: -1})

			_, first, p := chatAnswer(t, e, request("What does the project do?"))
			shared := chat.SharedCheckpoints(e.Tokenizer(), p.IDs)
			if len(shared) == 0 || shared[0] < len(p.IDs)*2/3 {
				t.Fatalf("shared checkpoints %v in a prompt of %d tokens: want the system turn's end", shared, len(p.IDs))
			}
			if first.CachedTokens != 0 {
				t.Fatalf("the first conversation found %d cached tokens", first.CachedTokens)
			}
			for round, q := range []string{"Which files are there?", "Run the tests, please."} {
				if round == 0 && backend != "cpu" {
					// The memory cache's path is the backend's own
					// Snapshot and Restore, which the other tests run on
					// the emulator; here only the restart.
					continue
				}
				if round == 1 {
					// A restart: the memory cache is gone, the folder is not.
					store.Wait()
					e.Close()
					store.Close()
					store, _ = openStore(t, dir)
					lo.Store = store
					e = loadDemo(t, backend, lo)
				}
				got, st, p2 := chatAnswer(t, e, request(q))
				if !slices.Equal(p2.IDs[:shared[0]], p.IDs[:shared[0]]) {
					t.Fatal("the two conversations' system turns differ in tokens")
				}
				if st.CachedTokens < shared[0] {
					t.Errorf("round %d: %d cached tokens, want at least the shared %d", round, st.CachedTokens, shared[0])
				}
				want, _, _ := collect(t, fresh, Request{Prompt: p2.IDs, MaxTokens: answerTokens(e)})
				if !slices.Equal(got, want) {
					t.Errorf("round %d: answer %v from the restored prefix, %v computed", round, got, want)
				}
				t.Logf("round %d: prompt %d tokens, %d cached (shared %d)", round, st.PromptTokens, st.CachedTokens, shared[0])
			}
		})
	}
}

// TestDamagedSnapshotIsComputed: a stored snapshot with a flipped byte in
// its state, or cut short, is ignored with a log line and deleted after a
// restart, and the prefix computed: the answer is the right one.
func TestDamagedSnapshotIsComputed(t *testing.T) {
	for _, damage := range []string{"flipped byte", "cut short"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			store, _ := openStore(t, dir)
			lo := LoadOptions{Store: store, StoreMinTokens: 64}
			e := loadDemo(t, "cpu", lo)
			r := agentRequest(t, "What does the project do?")
			want, _, p := chatAnswer(t, e, r)
			store.Wait()
			e.Close()
			store.Close()
			list, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
			if len(list) == 0 {
				t.Fatal("no snapshot was written")
			}
			for _, path := range list {
				data, _ := os.ReadFile(path)
				if damage == "flipped byte" {
					data[len(data)/2] ^= 0x01
				} else {
					data = data[:len(data)-1000]
				}
				os.WriteFile(path, data, 0o600)
			}
			store, logs := openStore(t, dir)
			lo.Store = store
			e = loadDemo(t, "cpu", lo)
			got, st, _ := chatAnswer(t, e, r)
			if st.CachedTokens != 0 || !slices.Equal(got, want) {
				t.Fatalf("%d cached tokens and answer %v from damaged snapshots, want 0 and %v", st.CachedTokens, got, want)
			}
			if !strings.Contains(logs.String(), "ignoring and deleting") {
				t.Fatalf("no log line for the damaged snapshots: %q", logs.String())
			}
			for _, path := range list {
				if _, err := os.Stat(path); err == nil {
					if _, st2, _ := chatAnswer(t, e, r); st2.CachedTokens == 0 {
						t.Fatalf("%s was neither deleted nor rewritten", path)
					}
				}
			}
			t.Logf("%s (prompt %d tokens): %s", damage, len(p.IDs), logs)
		})
	}
}

// TestOtherBackendFormatIsNotRead: a snapshot written by the exact path is
// not read by the fast one (another state format), so its answer is the
// fast path's own.
func TestOtherBackendFormatIsNotRead(t *testing.T) {
	dir := t.TempDir()
	store, _ := openStore(t, dir)
	r := agentRequest(t, "What does the project do?")
	exact := loadDemo(t, "cpu", LoadOptions{Store: store, StoreMinTokens: 64, Precision: "exact"})
	chatAnswer(t, exact, r)
	store.Wait()
	if store.Usage().Snapshots == 0 {
		t.Fatal("the exact path stored nothing")
	}
	fast := loadDemo(t, "cpu", LoadOptions{Store: store, StoreMinTokens: 64, Precision: "fast"})
	if _, st, _ := chatAnswer(t, fast, r); st.CachedTokens != 0 {
		t.Fatalf("the fast path read %d tokens the exact path stored", st.CachedTokens)
	}
}

// TestFullDiskStillAnswers: with the store on a 1 MiB tmpfs, the
// snapshots do not fit; the answers come all the same, and a log line says
// why nothing was kept.
func TestFullDiskStillAnswers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs to fill needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	store, logs := openStore(t, dir)
	e := loadDemo(t, "cpu", LoadOptions{Store: store, StoreMinTokens: 64})
	fresh := loadDemo(t, "cpu", LoadOptions{CacheBytes: -1})
	r := agentRequest(t, strings.Repeat("Tell me about the project and its files. ", 40))
	got, _, p := chatAnswer(t, e, r)
	store.Wait()
	want, _, _ := collect(t, fresh, Request{Prompt: p.IDs, MaxTokens: 12})
	if !slices.Equal(got, want) {
		t.Fatalf("answer %v with a full disk, %v without a store", got, want)
	}
	if !strings.Contains(logs.String(), "no space left") {
		t.Fatalf("no log line says the disk is full: %q", logs.String())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		if store.Usage().Bytes > 1<<20 {
			t.Fatalf("the store counts %d bytes on a 1 MiB disk", store.Usage().Bytes)
		}
	}
	t.Log(logs)
}
