package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
)

// Answer one question with the demo model: load a model folder, submit a
// conversation, stream the text, read the statistics.
func Example() {
	root, err := os.MkdirTemp("", "suzuran-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	dir, err := models.Install(root) // Suzuran Tiny, as the app installs it
	if err != nil {
		log.Fatal(err)
	}

	e, err := engine.Load(dir, engine.LoadOptions{Backend: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	thinking := false
	stream, _, err := e.SubmitChat(context.Background(), engine.ChatRequest{
		Render: chat.RenderRequest{
			Messages:            []chat.Message{{Role: "user", Content: "What does json.dumps do?"}},
			AddGenerationPrompt: true,
			EnableThinking:      &thinking,
		},
		// The zero Sampling is greedy; sample.ModelCardDefaults gives the
		// model card's parameters.
		MaxTokens: 64,
	})
	if err != nil {
		log.Fatal(err)
	}
	for ev := range stream.Events {
		fmt.Print(ev.Text)
	}
	stats, err := stream.Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\n%d prompt tokens, %d generated, finished: %s\n",
		stats.PromptTokens, stats.GeneratedTokens, stats.FinishReason)
	// Output:
	// `json.dumps`: Serialize ``obj`` to a JSON formatted ``str``.
	// 18 prompt tokens, 19 generated, finished: stop
}
