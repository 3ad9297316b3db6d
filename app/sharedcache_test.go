package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/app/service"
	"github.com/suzuran-app/suzuran/app/store"
)

// TestWindowAndAPIShareThePrefixCache: the chat window and the local API
// run on the service's one engine, so a prompt the window has read is a
// prefix cache hit for the same conversation sent through the API. The
// window asks a question; the API is then sent the same question, and its
// usage reports every prompt token but the last as cached (the engine
// snapshots one token before the end of every prompt).
func TestWindowAndAPIShareThePrefixCache(t *testing.T) {
	svc, state := startLocalAPI(t, "cpu")

	const question = "What does json.dumps do?"
	sent, err := svc.UI().Send(service.SendRequest{Text: question, Think: false})
	if err != nil {
		t.Fatal(err)
	}
	var reply store.Message
	awaitService(t, svc, 60*time.Second, "the end of the window's reply", func() bool {
		if reply, err = svc.Store().Message(context.Background(), sent.Reply.ID); err != nil {
			t.Fatal(err)
		}
		return reply.Status != store.StatusStreaming
	})
	if reply.Stats == nil {
		t.Fatalf("the window's reply has no stats: %+v", reply)
	}

	ids := servedModels(t, state.URL)
	if len(ids) == 0 {
		t.Fatal("/v1/models lists no model")
	}
	body := `{"model":` + jsonString(ids[0]) + `,"max_tokens":2,"messages":[{"role":"user","content":` + jsonString(question) +
		`}],"chat_template_kwargs":{"enable_thinking":false}}`
	resp, err := http.Post(state.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("API answer %d: %v", resp.StatusCode, err)
	}
	t.Logf("window: %d prompt tokens; API: %d prompt tokens, %d cached", reply.Stats.PromptTokens, out.Usage.PromptTokens, out.Usage.Details.CachedTokens)
	if out.Usage.PromptTokens != reply.Stats.PromptTokens {
		t.Fatalf("the API rendered %d prompt tokens, the window %d: the test needs the same prompt", out.Usage.PromptTokens, reply.Stats.PromptTokens)
	}
	if want := out.Usage.PromptTokens - 1; out.Usage.Details.CachedTokens != want {
		t.Errorf("the API request found %d tokens cached, want %d from the window's turn", out.Usage.Details.CachedTokens, want)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
