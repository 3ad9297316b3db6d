package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/prefixstore"
)

// TestCachedTokensOfASharedSystemPrompt: two API conversations with the
// same long system prompt and tools and different first questions; the
// second reports usage.prompt_tokens_details.cached_tokens of at least the
// shared system turn, from the memory cache and, after a restart (a new
// engine on the same prefix folder), from the disk.
func TestCachedTokensOfASharedSystemPrompt(t *testing.T) {
	dir := t.TempDir()
	system := strings.Repeat("Read the files before you change them, and say what you changed. ", 60)
	tools := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "read_file", "description": "Reads a file of the project.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}}}
	ask := func(ts *testServer, question string) (prompt, cached float64) {
		res := post(t, ts.url+"/v1/chat/completions", map[string]any{
			"messages": []any{map[string]any{"role": "system", "content": system}, map[string]any{"role": "user", "content": question}},
			"tools":    tools, "max_tokens": 4, "temperature": 0,
		})
		if res.status != http.StatusOK {
			t.Fatalf("status %d: %s", res.status, res.body)
		}
		v := res.json(t)
		return path(v, "usage", "prompt_tokens").(float64), path(v, "usage", "prompt_tokens_details", "cached_tokens").(float64)
	}
	start := func() (*testServer, *prefixstore.Store) {
		store, err := prefixstore.Open(prefixstore.Options{Dir: dir, Log: func(string) {}})
		if err != nil {
			t.Fatal(err)
		}
		l := loadModel(t, fixtureDir, engine.LoadOptions{Store: store, StoreMinTokens: 64})
		ts := startServer(t, l, nil)
		t.Cleanup(func() { store.Close() })
		return ts, store
	}
	ts, store := start()
	prompt, cached := ask(ts, "What does the project do?")
	if cached != 0 {
		t.Fatalf("the first conversation reports %v cached tokens", cached)
	}
	// The system turn: the prompt without the user turn and the
	// generation prompt, counted by the second conversation's shared part.
	_, cached = ask(ts, "Which files are there?")
	if cached < prompt-30 || cached >= prompt {
		t.Fatalf("the second conversation reports %v cached tokens of %v, want the system prompt and tools", cached, prompt)
	}
	shared := cached
	store.Wait()
	ts.Shutdown(t.Context())

	ts, _ = start()
	if _, again := ask(ts, "Run the tests, please."); again < shared {
		t.Fatalf("after a restart %v cached tokens, want the shared %v", again, shared)
	} else {
		t.Logf("prompt %v tokens; cached in memory %v, after a restart %v", prompt, shared, again)
	}
}
