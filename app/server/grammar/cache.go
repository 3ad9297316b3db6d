package grammar

import (
	"bytes"
	"container/list"
	"encoding/json"
	"fmt"
	"sync"
)

// Cache keeps recently compiled grammars by what they were compiled from,
// so that a schema or a tool set that comes back (an agent sends the same
// tools every turn, an app the same response format) reuses its automaton
// and the masks already computed: on a full-size vocabulary a state's
// first mask is a walk of every token, a later one a lookup. It is safe for
// concurrent use.
type Cache struct {
	vocab *Vocabulary
	max   int

	mu      sync.Mutex
	order   *list.List // of *cacheEntry, most recently used first
	entries map[string]*list.Element
}

type cacheEntry struct {
	key     string
	grammar *Grammar
}

// NewCache returns a cache of at most maxGrammars grammars over v (0
// means 16). A grammar holds a few megabytes at most on the full model's
// vocabulary (a mask of 31 KB per automaton state it has been in).
func NewCache(v *Vocabulary, maxGrammars int) *Cache {
	if maxGrammars <= 0 {
		maxGrammars = 16
	}
	return &Cache{vocab: v, max: maxGrammars, order: list.New(), entries: map[string]*list.Element{}}
}

// Vocabulary is the vocabulary the cache compiles for.
func (c *Cache) Vocabulary() *Vocabulary { return c.vocab }

// JSONObject is JSONObject through the cache.
func (c *Cache) JSONObject(o Options) (*Grammar, error) {
	return c.get(fmt.Sprintf("object %+v", o), func() (*Grammar, error) { return JSONObject(c.vocab, o) })
}

// JSONSchema is JSONSchema through the cache; schemas that differ only in
// whitespace share an entry.
func (c *Cache) JSONSchema(schema []byte, o Options) (*Grammar, error) {
	return c.get(fmt.Sprintf("schema %+v %s", o, compact(schema)), func() (*Grammar, error) { return JSONSchema(c.vocab, schema, o) })
}

// ToolCall is ToolCall through the cache.
func (c *Cache) ToolCall(functions []Function, o Options) (*Grammar, error) {
	var key bytes.Buffer
	fmt.Fprintf(&key, "tools %+v", o)
	for _, f := range functions {
		fmt.Fprintf(&key, " %q %s", f.Name, compact(f.Parameters))
	}
	return c.get(key.String(), func() (*Grammar, error) { return ToolCall(c.vocab, functions, o) })
}

// compact removes insignificant whitespace (key order is kept: it decides
// the order properties are written in); text that is not JSON is kept as
// is and fails to compile anyway.
func compact(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// get returns the cached grammar for key or compiles and keeps it. Errors
// are not kept: a bad schema costs little to refuse again.
func (c *Cache) get(key string, compile func() (*Grammar, error)) (*Grammar, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*cacheEntry).grammar, nil
	}
	c.mu.Unlock()
	// Compile outside the lock; two requests racing on one new schema both
	// compile it and the second keeps the first's.
	g, err := compile()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*cacheEntry).grammar, nil
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, grammar: g})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
	return g, nil
}
