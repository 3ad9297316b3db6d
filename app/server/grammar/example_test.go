package grammar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/suzuran-app/suzuran/app/server/grammar"
	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// A chat request answered with JSON that a schema validates, as the server
// does for response_format json_schema.
func Example() {
	root, _ := os.MkdirTemp("", "grammar-example-")
	defer os.RemoveAll(root)
	dir, err := models.Install(root) // the demo model
	if err != nil {
		fmt.Println(err)
		return
	}
	e, err := engine.Load(dir, engine.LoadOptions{Backend: "cpu"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

	off := false
	prompt, err := e.Encode(chat.RenderRequest{
		Messages:            []chat.Message{{Role: "user", Content: "Hello!"}},
		AddGenerationPrompt: true,
		EnableThinking:      &off,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	grammars, err := grammar.Shared(e)
	if err != nil {
		fmt.Println(err)
		return
	}
	schema := `{"type":"object","properties":{"greeting":{"type":"string","maxLength":40},"mood":{"enum":["happy","calm"]}},"required":["greeting","mood"],"additionalProperties":false}`
	g, err := grammars.JSONSchema([]byte(schema), grammar.Options{Thinking: chat.PromptOpensThinking(prompt.Text)})
	if err != nil {
		fmt.Println(err) // a *grammar.SchemaError: the server answers 400
		return
	}
	stream, err := e.Submit(context.Background(), engine.Request{Prompt: prompt.IDs, MaxTokens: 200, Constraint: g.NewConstraint()})
	if err != nil {
		fmt.Println(err)
		return
	}
	var text strings.Builder
	for ev := range stream.Events {
		text.WriteString(ev.Text) // the server streams these
	}
	stats, _ := stream.Result()
	// What the tiny demo model writes is not worth printing, but its shape
	// is the schema's whatever it writes.
	var answer struct {
		Greeting *string `json:"greeting"`
		Mood     string  `json:"mood"`
	}
	err = json.Unmarshal([]byte(text.String()), &answer)
	fmt.Println(err == nil, answer.Greeting != nil, answer.Mood == "happy" || answer.Mood == "calm", stats.FinishReason)
	// Output: true true true stop
}
