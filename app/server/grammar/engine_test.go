package grammar

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/model"
)

// fixtureDir is the tiny checkpoint with random weights: unconstrained it
// writes noise, so whatever structure its output has comes from the
// constraint.
var fixtureDir = filepath.Join("..", "..", "..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")

// boundedSchema can only be written in a bounded number of bytes (string
// lengths, item counts, digits and whitespace are all bounded), so a
// constrained generation with enough tokens always completes it.
const boundedSchema = `{"type":"object","properties":{
 "name":{"type":"string","maxLength":12},
 "mood":{"enum":["happy","sad","calm"]},
 "count":{"type":"integer"},
 "ok":{"type":"boolean"},
 "tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":3},
 "where":{"type":["object","null"],"properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}
},"required":["name","mood","count","ok","tags","where"],"additionalProperties":false}`

// alarmTools offers one function whose arguments are bounded likewise.
const alarmTools = `[{"type":"function","function":{"name":"set_alarm","description":"Set an alarm","parameters":{"type":"object",
 "properties":{"hour":{"type":"integer"},"label":{"type":"string","maxLength":10},"repeat":{"type":"string","enum":["never","daily","weekdays"]},"loud":{"type":"boolean"}},
 "required":["hour","label","repeat"]}}}]`

func loadEngine(t *testing.T, dir, backend string) (*engine.Engine, *Vocabulary) {
	t.Helper()
	e, err := engine.Load(dir, engine.LoadOptions{Backend: backend})
	if err != nil {
		t.Fatalf("loading %s on %s: %v", dir, backend, err)
	}
	t.Cleanup(func() { e.Close() })
	vocab, err := NewVocabulary(e.Tokenizer(), e.EOS(), e.VocabSize())
	if err != nil {
		t.Fatal(err)
	}
	return e, vocab
}

// generate runs one chat request to the end and returns its text.
func generate(t *testing.T, e *engine.Engine, render chat.RenderRequest, sampling model.Sampling, maxTokens int, c engine.Constraint) (string, engine.Stats) {
	t.Helper()
	stream, _, err := submitChat(e, render, sampling, maxTokens, c)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for ev := range stream.Events {
		text.WriteString(ev.Text)
	}
	stats, err := stream.Result()
	if err != nil {
		t.Fatalf("generation failed: %v", err)
	}
	return text.String(), stats
}

// submitChat is SubmitChat with a constraint, as the server does it.
func submitChat(e *engine.Engine, render chat.RenderRequest, sampling model.Sampling, maxTokens int, c engine.Constraint) (*engine.Stream, chat.Prompt, error) {
	prompt, err := e.Encode(render)
	if err != nil {
		return nil, prompt, err
	}
	s, err := e.Submit(context.Background(), engine.Request{
		Prompt: prompt.IDs, Sampling: sampling, MaxTokens: maxTokens,
		Checkpoints: prompt.Checkpoints, Constraint: c,
	})
	return s, prompt, err
}

func ask(question string, tools []any) chat.RenderRequest {
	off := false
	return chat.RenderRequest{
		Messages:            []chat.Message{{Role: "user", Content: question}},
		Tools:               tools,
		AddGenerationPrompt: true,
		EnableThinking:      &off,
	}
}

// samplings are greedy and a few hot seeds, so that the constraint is
// exercised on more than one path through the schema.
var samplings = []model.Sampling{
	{},
	{Temperature: 1.5, TopK: 40, Seed: 1},
	{Temperature: 1.0, TopP: 0.9, PresencePenalty: 1.5, Seed: 2},
	{Temperature: 2.0, Seed: 3},
}

// TestEngineWritesValidJSON: on the random-weights fixture (cpu) and the
// demo model (cpu), unconstrained output is not the JSON asked for, and
// constrained output always validates and ends when the object closes.
func TestEngineWritesValidJSON(t *testing.T) {
	check := validator(t, boundedSchema)
	for _, m := range []struct{ name, dir string }{{"fixture", fixtureDir}, {"demo", ""}} {
		t.Run(m.name, func(t *testing.T) {
			dir := m.dir
			if dir == "" {
				dir, _, _ = demoModel(t)
			}
			e, vocab := loadEngine(t, dir, "cpu")
			g, err := JSONSchema(vocab, []byte(boundedSchema), Options{})
			if err != nil {
				t.Fatal(err)
			}
			render := ask("Describe a cat as JSON with name, mood, count, ok, tags and where.", nil)
			free, _ := generate(t, e, render, model.Sampling{}, 64, nil)
			if validate(check, free) == nil {
				t.Fatalf("unconstrained output %q already validates: the test would prove nothing", free)
			}
			for _, s := range samplings {
				text, stats := generate(t, e, render, s, 1000, g.NewConstraint())
				if err := validate(check, text); err != nil {
					t.Errorf("sampling %+v: %q: %v", s, text, err)
				}
				if stats.FinishReason != engine.FinishStop {
					t.Errorf("sampling %+v: finish %q, want stop at the closing brace", s, stats.FinishReason)
				}
				t.Logf("sampling %+v: %d tokens: %s", s, stats.GeneratedTokens, text)
			}
		})
	}
}

// TestEngineForcedToolCall: the fixture model, made to call set_alarm,
// writes a call that the chat parser reads back with valid arguments.
func TestEngineForcedToolCall(t *testing.T) {
	fns, tools := functionsOf(t, alarmTools)
	check := validator(t, string(fns[0].Parameters))
	e, vocab := loadEngine(t, fixtureDir, "cpu")
	g, err := ToolCall(vocab, fns, Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := ask("Wake me at seven.", tools)
	free, _ := generate(t, e, render, model.Sampling{}, 64, nil)
	if out := chat.ParseOutput(free, chat.ParserOptions{Tools: tools}); len(out.ToolCalls) > 0 {
		t.Fatalf("unconstrained output %q already calls a tool: the test would prove nothing", free)
	}
	for _, s := range samplings {
		text, stats := generate(t, e, render, s, 1000, g.NewConstraint())
		out := chat.ParseOutput(text, chat.ParserOptions{Tools: tools})
		if len(out.ToolCalls) != 1 || out.ToolCalls[0].Name != "set_alarm" || strings.TrimSpace(out.Content) != "" {
			t.Fatalf("sampling %+v: %q parsed as %+v", s, text, out)
		}
		if err := validate(check, out.ToolCalls[0].Arguments); err != nil {
			t.Errorf("sampling %+v: arguments %s: %v", s, out.ToolCalls[0].Arguments, err)
		}
		if stats.FinishReason != engine.FinishStop {
			t.Errorf("sampling %+v: finish %q, want stop after </tool_call>", s, stats.FinishReason)
		}
		t.Logf("sampling %+v: %d tokens: %s", s, stats.GeneratedTokens, out.ToolCalls[0].Arguments)
	}
}

// TestEngineEmu runs constrained requests on the emulated GPU backend,
// whose passes sample on the device unless constrained, so this is the
// path that reads the logits back. Its output must validate as on cpu. The
// two backends' texts are not compared token for token: their logits
// differ in the last bits, and once the mask has cut the model's favourite
// tokens away the survivors are often near ties, so greedy paths part
// after a while (the engine's own tests check the host path against the
// device's sampling without a mask).
func TestEngineEmu(t *testing.T) {
	if testing.Short() {
		t.Skip("emu compiles the Metal kernels with the system C++ compiler")
	}
	// Small schemas: an emulated decode step costs about 0.1 s.
	const schema = `{"type":"object","properties":{"mood":{"enum":["happy","sad","calm"]},"ok":{"type":"boolean"},"n":{"type":"integer"}},"required":["mood","ok","n"],"additionalProperties":false}`
	fns := []Function{{Name: "set_mode", Parameters: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string","enum":["eco","fast"]},"level":{"type":"integer"}},"required":["mode","level"]}`)}}
	dir, _, _ := demoModel(t)
	check := validator(t, schema)
	checkArgs := validator(t, string(fns[0].Parameters))
	e, vocab := loadEngine(t, dir, "emu")
	g, err := JSONSchema(vocab, []byte(schema), Options{})
	if err != nil {
		t.Fatal(err)
	}
	text, stats := generate(t, e, ask("Describe a cat as JSON.", nil), model.Sampling{}, 200, g.NewConstraint())
	if err := validate(check, text); err != nil || stats.FinishReason != engine.FinishStop {
		t.Errorf("json_schema: %q (finish %s): %v", text, stats.FinishReason, err)
	}
	t.Logf("json_schema: %d tokens: %s", stats.GeneratedTokens, text)
	calls, err := ToolCall(vocab, fns, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The prompt leaves the tool out: emu's prefill of the template's tool
	// instructions (500 tokens) takes minutes, and the constraint alone
	// decides the call's shape.
	text, stats = generate(t, e, ask("Go fast.", nil), model.Sampling{Temperature: 1, Seed: 4}, 200, calls.NewConstraint())
	tools, err := chat.DecodeJSON([]byte(`[{"type":"function","function":{"name":"set_mode","parameters":` + string(fns[0].Parameters) + `}}]`))
	if err != nil {
		t.Fatal(err)
	}
	out := chat.ParseOutput(text, chat.ParserOptions{Tools: tools.([]any)})
	if len(out.ToolCalls) != 1 || stats.FinishReason != engine.FinishStop {
		t.Fatalf("tool call: %q parsed as %+v (finish %s)", text, out, stats.FinishReason)
	}
	if err := validate(checkArgs, out.ToolCalls[0].Arguments); err != nil {
		t.Errorf("tool call arguments %s: %v", out.ToolCalls[0].Arguments, err)
	}
	t.Logf("tool call: %d tokens: %s", stats.GeneratedTokens, out.ToolCalls[0].Arguments)
}

// TestJSONObjectOnTheFixture: json_object on the random model. Its strings
// are unbounded and a random model rarely closes one, so a run may be cut
// by the token budget; every run's text must still be a prefix that the
// grammar can complete (the engine applied every mask), and a run that
// finished must parse as an object.
func TestJSONObjectOnTheFixture(t *testing.T) {
	e, vocab := loadEngine(t, fixtureDir, "cpu")
	g, err := JSONObject(vocab, Options{})
	if err != nil {
		t.Fatal(err)
	}
	finished := 0
	for i, s := range samplings {
		text, stats := generate(t, e, ask("Answer in JSON.", nil), s, 300, g.NewConstraint())
		if g.dfa.walk(g.dfa.start, []byte(text)) == dead {
			t.Errorf("run %d: %q leaves the grammar", i, text)
		}
		if stats.FinishReason == engine.FinishLength {
			continue
		}
		finished++
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil || stats.FinishReason != engine.FinishStop {
			t.Errorf("run %d: %q (finish %s): %v", i, text, stats.FinishReason, err)
		}
	}
	t.Logf("%d of %d runs closed their object within 300 tokens", finished, len(samplings))
}
