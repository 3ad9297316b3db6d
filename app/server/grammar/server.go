package grammar

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// ForEngine builds the Vocabulary of e's model and a Cache over it (of at
// most maxGrammars grammars; 0 means 16): what a server keeps beside its
// engine.
func ForEngine(e *engine.Engine, maxGrammars int) (*Cache, error) {
	v, err := NewVocabulary(e.Tokenizer(), e.EOS(), e.VocabSize())
	if err != nil {
		return nil, err
	}
	return NewCache(v, maxGrammars), nil
}

// shared is the cache Shared hands out, for the engine it was built for.
var shared struct {
	sync.Mutex
	engine *engine.Engine
	cache  *Cache
}

// Shared returns a cache for e (ForEngine with the default size), built
// on first use and kept for later calls with the same engine. Only the
// most recent engine's cache is kept: the app serves one model at a time,
// and a reloaded model's cache replaces the old one instead of keeping its
// vocabulary alive.
func Shared(e *engine.Engine) (*Cache, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.engine == e && shared.cache != nil {
		return shared.cache, nil
	}
	c, err := ForEngine(e, 0)
	if err != nil {
		return nil, err
	}
	shared.engine, shared.cache = e, c
	return c, nil
}

// Functions reads function tools as a chat request carries them, decoded by
// chat.DecodeJSON: [{"type": "function", "function": {"name": …,
// "parameters": {…}}}, …]. Parameters keep their key order (it decides the
// order the call writes them in).
func Functions(tools []any) ([]Function, error) {
	var out []Function
	for i, tool := range tools {
		obj, ok := tool.(*chat.Object)
		if !ok {
			return nil, fmt.Errorf("tools[%d] is %s, not an object", i, kindOf(tool))
		}
		if fn, ok := obj.Get("function"); ok {
			if obj, ok = fn.(*chat.Object); !ok {
				return nil, fmt.Errorf("tools[%d].function is %s, not an object", i, kindOf(fn))
			}
		}
		name, _ := obj.Get("name")
		f := Function{}
		if f.Name, ok = name.(string); !ok {
			return nil, fmt.Errorf("tools[%d] has no function name", i)
		}
		if params, ok := obj.Get("parameters"); ok && params != nil {
			raw, err := json.Marshal(params)
			if err != nil {
				return nil, fmt.Errorf("tools[%d].parameters: %w", i, err)
			}
			f.Parameters = raw
		}
		out = append(out, f)
	}
	return out, nil
}
