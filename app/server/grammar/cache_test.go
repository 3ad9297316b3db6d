package grammar

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/engine/chat"
)

func TestCacheReusesAndEvicts(t *testing.T) {
	_, _, vocab := demoModel(t)
	c := NewCache(vocab, 2)
	a1, err := c.JSONSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"}}}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.JSONSchema([]byte("{\"type\": \"object\",\n \"properties\": {\"a\": {\"type\": \"integer\"}}}"), Options{})
	if a1 != a2 {
		t.Error("the same schema with other whitespace compiled again")
	}
	if b, _ := c.JSONSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"}}}`), Options{Thinking: true}); b == a1 {
		t.Error("other options share the grammar")
	}
	fns := []Function{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}
	t1, _ := c.ToolCall(fns, Options{})
	if t2, _ := c.ToolCall(fns, Options{}); t1 != t2 {
		t.Error("the same tools compiled again")
	}
	// Capacity 2: the thinking variant and the tools are the newest, so
	// the first schema was evicted.
	if a3, _ := c.JSONSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"}}}`), Options{}); a3 == a1 {
		t.Error("the oldest grammar was not evicted")
	}
	if _, err := c.JSONSchema([]byte(`{"type":"string","multipleOf":2}`), Options{}); err == nil {
		t.Error("an unsupported schema compiled through the cache")
	}
	o1, _ := c.JSONObject(Options{})
	if o2, _ := c.JSONObject(Options{}); o1 != o2 {
		t.Error("json_object compiled again")
	}
}

// TestConcurrentConstraints runs constraints of one cached grammar on
// several goroutines (the masks are shared and filled lazily under a lock;
// run with -race).
func TestConcurrentConstraints(t *testing.T) {
	_, tok, vocab := demoModel(t)
	c := NewCache(vocab, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := c.JSONSchema([]byte(boundedSchema), Options{})
			if err != nil {
				errs <- err
				return
			}
			con := g.NewConstraint()
			logits := make([]float32, vocab.width)
			for _, id := range tok.Encode(benchDocument) {
				con.Mask(logits)
				if err := con.Accept(id); err != nil {
					errs <- fmt.Errorf("goroutine %d: %w", i, err)
					return
				}
			}
			if !con.Done() {
				errs <- fmt.Errorf("goroutine %d: not done after the document", i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestForEngineAndFunctions: the server's path from an engine and the
// decoded tools of a request to a tool-call grammar.
func TestForEngineAndFunctions(t *testing.T) {
	e, _ := loadEngine(t, fixtureDir, "cpu")
	cache, err := ForEngine(e, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, tools := functionsOf(t, weatherTools)
	fns, err := Functions(tools)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := functionsOf(t, weatherTools)
	if len(fns) != len(want) {
		t.Fatalf("%d functions, want %d", len(fns), len(want))
	}
	for i := range fns {
		if fns[i].Name != want[i].Name || string(fns[i].Parameters) != string(compact(want[i].Parameters)) {
			t.Errorf("function %d: %s %s, want %s %s", i, fns[i].Name, fns[i].Parameters, want[i].Name, compact(want[i].Parameters))
		}
	}
	g, err := cache.ToolCall(fns, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := Shared(e)
	if err != nil {
		t.Fatal(err)
	}
	if s2, _ := Shared(e); s1 != s2 || s1.Vocabulary().width != e.VocabSize() {
		t.Error("Shared built a second cache for the same engine")
	}
	if !accepts(g, "<tool_call>\n<function=ping>\n</function>\n</tool_call>") {
		t.Error("the grammar from decoded tools refuses a call of ping")
	}
	for _, bad := range []string{`[1]`, `[{"type":"function","function":{"parameters":{}}}]`, `[{"function":7}]`} {
		v, _ := chat.DecodeJSON([]byte(bad))
		if _, err := Functions(v.([]any)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
