package grammar

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
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
	if _, err := c.JSONSchema([]byte(`{"type":"string","pattern":"x"}`), Options{}); err == nil {
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
