package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/suzuran-app/suzuran/engine"
)

// budgetSchema is a random schema of the keywords constrained sampling
// supports, nested up to depth levels, for TestConstrainedOutputAtBudget.
func budgetSchema(rng *rand.Rand, depth int) map[string]any {
	n := 6
	if depth > 0 {
		n = 10
	}
	switch rng.IntN(n) {
	case 0:
		s := map[string]any{"type": "string"}
		switch rng.IntN(4) {
		case 0:
			s["minLength"], s["maxLength"] = 1+rng.IntN(3), 4+rng.IntN(6)
		case 1:
			s["format"] = []string{"date", "date-time", "uuid"}[rng.IntN(3)]
		case 2:
			s["enum"] = []any{"red", "green", "blue"}[:1+rng.IntN(3)]
		}
		return s
	case 1:
		s := map[string]any{"type": "integer"}
		if rng.IntN(2) == 0 {
			lo := rng.IntN(200) - 100
			s["minimum"], s["maximum"] = lo, lo+rng.IntN(500)
		}
		return s
	case 2:
		return map[string]any{"type": "number"}
	case 3:
		return map[string]any{"type": []string{"boolean", "null"}[rng.IntN(2)]}
	case 4:
		return map[string]any{"const": []any{"fixed", 7, true, nil}[rng.IntN(4)]}
	case 5:
		return map[string]any{"type": []any{"string", "integer", "null"}[:2+rng.IntN(2)]}
	case 6, 7:
		props := map[string]any{}
		var required []any
		for i := range 1 + rng.IntN(4) {
			name := fmt.Sprintf("k%d", i)
			props[name] = budgetSchema(rng, depth-1)
			if rng.IntN(3) > 0 {
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props}
		if required != nil {
			s["required"] = required
		}
		if rng.IntN(2) == 0 {
			s["additionalProperties"] = false
		}
		return s
	case 8:
		s := map[string]any{"type": "array", "items": budgetSchema(rng, depth-1)}
		if rng.IntN(2) == 0 {
			s["minItems"], s["maxItems"] = rng.IntN(3), 3+rng.IntN(3)
		}
		return s
	}
	return map[string]any{"anyOf": []any{budgetSchema(rng, depth-1), budgetSchema(rng, depth-1)}}
}

// TestConstrainedOutputAtBudget: 200 requests with random schemas (a few
// json_object) and random max_tokens, most of them too small for what the
// random model starts to write, some with thinking on: every answer parses
// and validates against its schema (santhosh-tekuri/jsonschema, formats
// asserted), finishing with "length" when the budget had to shape it. A
// budget too small for the shortest valid answer is refused up front (400
// naming max_tokens). Seeded, so a failure is reproducible.
func TestConstrainedOutputAtBudget(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	rng := rand.New(rand.NewPCG(2027, 5))
	const runs = 200
	var answered, cut, refused int
	for i := range runs {
		var format map[string]any
		var schema []byte
		if rng.IntN(8) == 0 {
			format = map[string]any{"type": "json_object"}
			schema = []byte(`{"type":"object"}`)
		} else {
			s := budgetSchema(rng, 3)
			if rng.IntN(3) > 0 { // the usual case: an object at the top
				s = map[string]any{"type": "object", "properties": map[string]any{"v": s}, "required": []any{"v"}}
			}
			var err error
			if schema, err = json.Marshal(s); err != nil {
				t.Fatal(err)
			}
			format = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "r", "schema": json.RawMessage(schema), "strict": true}}
		}
		budget := 1 + rng.IntN(60)
		thinking := rng.IntN(4) == 0
		res := post(t, ts.url+"/v1/chat/completions", map[string]any{
			"messages": userMessage("Answer in JSON."), "response_format": format, "max_tokens": budget, "seed": i,
			"chat_template_kwargs": map[string]any{"enable_thinking": thinking},
		})
		if res.status == 400 {
			v := res.json(t)
			if msg, _ := path(v, "error", "message").(string); path(v, "error", "param") != "max_tokens" || !strings.Contains(msg, "too few for the shortest answer") {
				t.Fatalf("run %d, schema %s, max_tokens %d: %s", i, schema, budget, res.body)
			}
			refused++
			continue
		}
		if res.status != 200 {
			t.Fatalf("run %d, schema %s: %d %s", i, schema, res.status, res.body)
		}
		v := res.json(t)
		content, _ := path(v, "choices", 0, "message", "content").(string)
		finish := path(v, "choices", 0, "finish_reason")
		if err := validateJSON(t, schema, content); err != nil {
			t.Fatalf("run %d, schema %s, max_tokens %d, thinking %v: %q (finish %v) does not validate: %v", i, schema, budget, thinking, content, finish, err)
		}
		generated := path(v, "usage", "completion_tokens").(float64)
		// An answer the budget shaped says length (its end may come a few
		// tokens early, when the model took a token that closed it at
		// once); one the model ended itself, stop.
		switch finish {
		case "length":
			cut++
		case "stop":
		default:
			t.Errorf("run %d: finish_reason %v", i, finish)
		}
		if int(generated) > budget {
			t.Errorf("run %d: %v tokens generated for max_tokens %d", i, generated, budget)
		}
		answered++
	}
	t.Logf("%d runs: %d answered (%d closed at max_tokens, finish length), %d refused as too few tokens for the shortest answer", runs, answered, cut, refused)
	// The budgets are drawn small on purpose; most of them must be served
	// and closed, not refused (a refusal means no valid answer fits).
	if answered < runs*3/4 || cut < runs/4 {
		t.Errorf("only %d of %d answered, %d of them closed by the budget", answered, runs, cut)
	}
}

// validateJSON parses text and validates it against schema.
func validateJSON(t *testing.T, schema []byte, text string) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(schema)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	compiled, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return compiled.Validate(v)
}

// TestForcedToolCallAtBudget: a forced call cut by max_tokens is closed
// validly, its arguments validating against the tool's parameters, and
// says length when the budget shaped it; a budget too small for the
// shortest call is refused up front.
func TestForcedToolCallAtBudget(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	params := []byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":14},"unit":{"enum":["C","F"]}},"required":["city","days"]}`)
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "forecast", "parameters": json.RawMessage(params)}}}
	rng := rand.New(rand.NewPCG(7, 7))
	var answered, cut, refused int
	for i := range 30 {
		budget := 30 + rng.IntN(120)
		res := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("Weather?"), "tools": tools, "tool_choice": "required",
			"max_tokens": budget, "seed": i, "chat_template_kwargs": map[string]any{"enable_thinking": false}})
		if res.status == 400 {
			if path(res.json(t), "error", "param") != "max_tokens" {
				t.Fatalf("max_tokens %d: %s", budget, res.body)
			}
			refused++
			continue
		}
		v := res.json(t)
		call := path(v, "choices", 0, "message", "tool_calls", 0)
		args, _ := path(call, "function", "arguments").(string)
		if res.status != 200 || path(call, "function", "name") != "forecast" {
			t.Fatalf("max_tokens %d: %d %s", budget, res.status, res.body)
		}
		if err := validateJSON(t, params, args); err != nil {
			t.Fatalf("max_tokens %d: arguments %q do not validate: %v", budget, args, err)
		}
		switch path(v, "choices", 0, "finish_reason") {
		case "length":
			cut++
		case "tool_calls":
		default:
			t.Errorf("max_tokens %d: %s", budget, res.body)
		}
		answered++
	}
	t.Logf("30 forced calls: %d answered (%d closed by max_tokens), %d refused as too few tokens", answered, cut, refused)
	if answered < 15 || cut == 0 {
		t.Errorf("%d answered, %d closed by the budget", answered, cut)
	}
}

// TestBudgetLeavesAFittingAnswer: a forced call that fits its max_tokens is
// written as without a budget, token for token (temperature 0), and ends
// as a call: the budget steps in only when the answer would not fit.
func TestBudgetLeavesAFittingAnswer(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), nil)
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "enum": []any{"Paris", "Berlin"}}}, "required": []any{"city"}}}}}
	ask := func(maxTokens int) (args string, finish any, tokens float64) {
		v := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": userMessage("Weather in Paris?"), "tools": tools, "tool_choice": "required",
			"max_tokens": maxTokens, "temperature": 0, "chat_template_kwargs": map[string]any{"enable_thinking": false}}).json(t)
		args, _ = path(v, "choices", 0, "message", "tool_calls", 0, "function", "arguments").(string)
		tokens, _ = path(v, "usage", "completion_tokens").(float64)
		return args, path(v, "choices", 0, "finish_reason"), tokens
	}
	free, _, n := ask(4000)
	for _, budget := range []int{int(n), int(n) + 6} {
		if args, finish, m := ask(budget); args != free || finish != "tool_calls" || m != n {
			t.Errorf("max_tokens %d: %s (%v, %v tokens); with room to spare %s (%v tokens)", budget, args, finish, m, free, n)
		}
	}
}
