package grammar

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// randomSchema builds a random schema from the supported keywords, nested
// up to depth levels.
func randomSchema(rng *rand.Rand, depth int) map[string]any {
	kinds := []string{"string", "integer", "number", "boolean", "null", "enum", "const", "types"}
	if depth > 0 {
		kinds = append(kinds, "object", "object", "array", "anyOf")
	}
	switch kinds[rng.IntN(len(kinds))] {
	case "string":
		s := map[string]any{"type": "string"}
		switch rng.IntN(5) {
		case 0:
			s["minLength"] = rng.IntN(3)
			s["maxLength"] = 3 + rng.IntN(4)
		case 1:
			s["format"] = []string{"date", "time", "date-time", "uuid"}[rng.IntN(4)]
		case 2:
			s["pattern"] = []string{`^[a-z]{1,3}-\d+$`, `x`, `^(?i)ok|no$`, `^[^"\\]{0,4}$`, `^\S+@\S+$`}[rng.IntN(5)]
		}
		return s
	case "integer":
		s := map[string]any{"type": "integer"}
		if rng.IntN(2) == 0 {
			lo := rng.IntN(2000) - 1000
			s["minimum"] = lo
			s["maximum"] = lo + rng.IntN(3000)
		}
		return s
	case "number":
		if rng.IntN(2) == 0 {
			return map[string]any{"type": "number", "minimum": 0}
		}
		return map[string]any{"type": "number"}
	case "boolean", "null":
		return map[string]any{"type": []string{"boolean", "null"}[rng.IntN(2)]}
	case "enum":
		return map[string]any{"enum": []any{"a", 1, nil, true, "é\"\\", []any{1, "x"}, map[string]any{"k": 2}}[:1+rng.IntN(7)]}
	case "const":
		return map[string]any{"const": []any{"c", 2.5, false, map[string]any{"a": []any{}}}[rng.IntN(4)]}
	case "types":
		return map[string]any{"type": []string{"string", "integer", "null"}[:1+rng.IntN(3)]}
	case "object":
		props := map[string]any{}
		required := []string{}
		for i := range 1 + rng.IntN(4) {
			name := fmt.Sprintf("p%d", i)
			props[name] = randomSchema(rng, depth-1)
			if rng.IntN(2) == 0 {
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "required": required}
		if rng.IntN(2) == 0 {
			s["additionalProperties"] = false
		}
		return s
	case "array":
		s := map[string]any{"type": "array", "items": randomSchema(rng, depth-1)}
		if rng.IntN(2) == 0 {
			s["minItems"] = rng.IntN(2)
			s["maxItems"] = 2 + rng.IntN(3)
		}
		if rng.IntN(3) == 0 {
			s["prefixItems"] = []any{randomSchema(rng, depth-1)}
		}
		return s
	}
	var branches []any
	for range 2 + rng.IntN(2) {
		branches = append(branches, randomSchema(rng, depth-1))
	}
	return map[string]any{"anyOf": branches}
}

// TestRandomSchemas extends the property test to schemas nobody wrote by
// hand: random combinations of the supported keywords, each walked at
// random, each walk validated by the independent validator.
func TestRandomSchemas(t *testing.T) {
	_, _, vocab := demoModel(t)
	rng := rand.New(rand.NewPCG(11, 13))
	schemas := 80
	if testing.Short() {
		schemas = 20
	}
	for i := range schemas {
		raw, err := json.Marshal(randomSchema(rng, 3))
		if err != nil {
			t.Fatal(err)
		}
		g, err := JSONSchema(vocab, raw, Options{})
		if err != nil {
			t.Fatalf("schema %d %s: %v", i, raw, err)
		}
		check := validator(t, string(raw))
		dist := distances(t, g)
		for range 20 {
			text := randomText(g, dist, rng, rng.IntN(120))
			if err := validate(check, text); err != nil {
				t.Fatalf("schema %d %s: random walk wrote %q: %v", i, raw, text, err)
			}
		}
	}
}
