package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// chatReference is greedy.json's answer to question, what transformers
// generates from the demo model's weights.
func chatReference(t *testing.T, question string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoFixtures(t), "demo", "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct {
			Question   string `json:"question"`
			GreedyText string `json:"greedy_text"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Cases {
		if c.Question == question {
			return c.GreedyText
		}
	}
	t.Fatalf("greedy.json has no case %q", question)
	return ""
}

// chatProcess is `suzuran chat args...` as a fresh process of this test
// binary (see TestMain), in private home, config, cache and state
// folders, so the demo model is installed from the binary as on a new
// machine.
func chatProcess(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], append([]string{"chat"}, args...)...)
	cmd.Env = append(os.Environ(), suzuranMainEnv+"=1",
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"),
		"XDG_STATE_HOME="+filepath.Join(home, "state"))
	return cmd
}

// runChat runs `suzuran chat args...` in a fresh process (see TestMain)
// with stdin, in private config and cache folders, so the demo model is
// installed from the binary as on a new machine.
func runChatProcess(t *testing.T, stdin string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := chatProcess(t, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("suzuran chat %v: %v\nstderr:\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// TestChatPipedAnswersTheReference is
// `printf 'What does json.dumps do?\n' | suzuran chat --temperature 0 --think off`.
func TestChatPipedAnswersTheReference(t *testing.T) {
	const question = "What does json.dumps do?"
	want := chatReference(t, question)
	stdout, stderr := runChatProcess(t, question+"\n", "--temperature", "0", "--think", "off")
	if stdout != want+"\n\n" {
		t.Fatalf("stdout:\n%q\nwant the reference answer and an empty line:\n%q", stdout, want+"\n\n")
	}
	if !strings.Contains(stderr, "using the demo model Suzuran Tiny") {
		t.Errorf("stderr does not say the demo model is used:\n%s", stderr)
	}
	if !strings.Contains(stderr, "prefill 18 tokens at") || !strings.Contains(stderr, "decode 19 tokens at") {
		t.Errorf("stderr lacks the statistics line (18 prompt tokens, 19 generated):\n%s", stderr)
	}
	if strings.Contains(stdout+stderr, "\x1b[") {
		t.Errorf("ANSI escapes in output that is not a terminal")
	}
}

// TestChatPipedConversation sends four lines: two turns of one
// conversation, /reset, and the first question again. The second answer must
// be the greedy answer to the whole conversation, computed with only the new
// tokens prefilled, and the repeated question after /reset must give the
// first answer again from the cache.
func TestChatPipedConversation(t *testing.T) {
	const q1, q2 = "What does json.dumps do?", "What is os.path.join?"
	a1 := chatReference(t, q1)
	stdout, stderr := runChatProcess(t, q1+"\n"+q2+"\n/reset\n"+q1+"\n", "--temperature", "0", "--think", "off")

	// The expected second answer: a fresh engine, no cache, given the
	// whole conversation.
	dir, _, err := resolveModelIsolated(t)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Load(dir, engine.LoadOptions{CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	off := false
	stream, _, err := e.SubmitChat(context.Background(), engine.ChatRequest{Render: chat.RenderRequest{
		Messages: []chat.Message{
			{Role: "user", Content: q1},
			{Role: "assistant", Content: a1},
			{Role: "user", Content: q2},
		},
		AddGenerationPrompt: true,
		EnableThinking:      &off,
	}})
	if err != nil {
		t.Fatal(err)
	}
	var a2 strings.Builder
	for ev := range stream.Events {
		a2.WriteString(ev.Text)
	}
	if a2.Len() == 0 {
		t.Fatal("the reference engine answered nothing to the second turn")
	}

	want := a1 + "\n\n" + a2.String() + "\n\n" + a1 + "\n\n"
	if stdout != want {
		t.Fatalf("stdout:\n%q\nwant:\n%q", stdout, want)
	}
	stats := statsLines(stderr)
	if len(stats) != 3 {
		t.Fatalf("want 3 statistics lines on stderr, got:\n%s", stderr)
	}
	// Turn 2 restores the 14 tokens up to the first turn's assistant
	// header (see engine.TestMultiTurnReusesThePrefix); the repeated first
	// question restores all of its 18 prompt tokens but the last.
	if !strings.Contains(stats[1], "prefill 38 tokens (14 more from the cache)") {
		t.Errorf("second turn did not reuse the cached prefix: %s", stats[1])
	}
	if !strings.Contains(stats[2], "prefill 1 token (17 more from the cache)") {
		t.Errorf("the repeated question did not reuse its cached prompt: %s", stats[2])
	}
}

func statsLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "[prefill ") {
			out = append(out, l)
		}
	}
	return out
}

// resolveModelIsolated resolves the default model with private folders.
func resolveModelIsolated(t *testing.T) (string, string, error) {
	isolate(t)
	return resolveModel("")
}

func TestChatFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"chat", "--think", "maybe"}, "--think"},
		{[]string{"chat", "--temperature", "-1"}, "--temperature"},
		{[]string{"chat", "--backend", "abacus"}, "unknown backend"},
		{[]string{"chat", "--model", "/nonexistent"}, "/nonexistent"},
		{[]string{"chat", "--precision", "half"}, `--precision: precision "half"`},
		{[]string{"chat", "--backend", "emu", "--precision", "exact"}, "only the cpu backend has a choice of precision"},
	} {
		_, stderr, err := execute(t, c.args...)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("suzuran %v: err %v, stderr %q; want an error about %s", c.args, err, stderr, c.want)
		}
	}
}

// TestChatInterruptStopsTheAnswer drives a session directly with an
// interrupt already pending: the answer must stop early (select picks the
// pending interrupt at the first or a following token: the chance it never
// does within the 48-token answer is 2^-48), the conversation keeps the
// partial answer, and two interrupts within a second ask to quit.
func TestChatInterruptStopsTheAnswer(t *testing.T) {
	const question = "Explain itertools.chain."
	full := chatReference(t, question)
	dir, _, err := resolveModelIsolated(t)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Load(dir, engine.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var out, errOut bytes.Buffer
	s := &chatSession{engine: e, opts: chatOptions{temperatureSet: true}, out: &out, errOut: &errOut}

	interrupt := make(chan os.Signal, 2)
	interrupt <- os.Interrupt
	quit, err := s.ask(question, interrupt)
	if err != nil || quit {
		t.Fatalf("ask: quit %v, err %v", quit, err)
	}
	partial := strings.TrimRight(out.String(), "\n")
	if s.lastFinish != engine.FinishCancelled || !strings.HasPrefix(full, partial) || len(partial) >= len(full) {
		t.Fatalf("finish %q, answer %q: want a stopped prefix of %q", s.lastFinish, partial, full)
	}
	if !strings.Contains(errOut.String(), "[stopped]") {
		t.Errorf("no [stopped] note:\n%s", errOut.String())
	}
	if len(s.history) != 2 || s.history[1].Role != "assistant" || s.history[1].Content != strings.TrimSpace(partial) {
		t.Fatalf("history after a stopped answer: %+v", s.history)
	}

	interrupt <- os.Interrupt
	interrupt <- os.Interrupt
	if quit, err := s.ask(question, interrupt); err != nil || !quit {
		t.Fatalf("two interrupts within a second: quit %v, err %v; want quit", quit, err)
	}
}

// TestChatMaxTokens: --max-tokens cuts the answer, and the statistics say
// why it ended. The first three greedy tokens of the json.dumps answer are
// "`json", ".dumps", "`:".
func TestChatMaxTokens(t *testing.T) {
	stdout, stderr := runChatProcess(t, "What does json.dumps do?\n", "--temperature", "0", "--think", "off", "--max-tokens", "3")
	if stdout != "`json.dumps`:\n\n" {
		t.Errorf("stdout %q, want the first three tokens and an empty line", stdout)
	}
	if !strings.Contains(stderr, "decode 3 tokens") || !strings.Contains(stderr, "· length]") {
		t.Errorf("stderr lacks the cut answer's statistics:\n%s", stderr)
	}
}

// TestChatReasoningIsDimmed: on a terminal the reasoning streams to stdout
// between dim and reset escapes, set off from the answer by an empty line;
// off a terminal it goes to stderr, so stdout holds only answers.
func TestChatReasoningIsDimmed(t *testing.T) {
	events := []chat.Event{
		{Kind: chat.ReasoningDelta, Text: "json is "},
		{Kind: chat.ReasoningDelta, Text: "a module."},
		{Kind: chat.ContentDelta, Text: "It serializes."},
	}
	for _, terminal := range []bool{true, false} {
		var out, errOut bytes.Buffer
		s := &chatSession{out: &out, errOut: &errOut, color: terminal}
		r := &reply{}
		w := &replyWriter{s: s, r: r}
		w.show(events)
		wantOut, wantErr := "It serializes.", "json is a module."
		if terminal {
			wantOut, wantErr = "\x1b[2mjson is a module.\x1b[0m\n\nIt serializes.", ""
		}
		if out.String() != wantOut || errOut.String() != wantErr {
			t.Errorf("terminal %v: stdout %q, stderr %q; want %q and %q", terminal, out.String(), errOut.String(), wantOut, wantErr)
		}
		if r.reasoning.String() != "json is a module." || r.content.String() != "It serializes." {
			t.Errorf("terminal %v: reply kept reasoning %q and content %q", terminal, r.reasoning.String(), r.content.String())
		}
	}
}

// TestChatCommands: /think on|off switches the template's thinking flag and
// the model card's sampling defaults for the next request, /reset forgets
// the conversation, and anything else starting with "/" only prints help.
func TestChatCommands(t *testing.T) {
	var errOut bytes.Buffer
	s := &chatSession{out: &bytes.Buffer{}, errOut: &errOut,
		history: []chat.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}}
	for _, c := range []struct {
		line  string
		think bool
		note  string
	}{
		{"/think on", true, "[thinking on]"},
		{"/think maybe", true, "commands: /reset, /think on|off"},
		{"/think off", false, "[thinking off]"},
	} {
		errOut.Reset()
		if !s.command(c.line) {
			t.Fatalf("%q was not taken as a command", c.line)
		}
		req := s.request()
		want := sample.ModelCardDefaults(c.think)
		if s.think != c.think || *req.Render.EnableThinking != c.think || req.Sampling.Temperature != want.Temperature || req.Sampling.TopP != want.TopP {
			t.Errorf("after %q: think %v, request thinking %v sampling %+v; want thinking %v and %+v",
				c.line, s.think, *req.Render.EnableThinking, req.Sampling, c.think, want)
		}
		if !strings.Contains(errOut.String(), c.note) {
			t.Errorf("after %q: stderr %q, want %q", c.line, errOut.String(), c.note)
		}
	}
	if len(s.request().Render.Messages) != 2 {
		t.Fatalf("the conversation was lost before /reset")
	}
	if !s.command("/reset") || len(s.request().Render.Messages) != 0 || !strings.Contains(errOut.String(), "[new conversation]") {
		t.Errorf("/reset kept %d messages; stderr %q", len(s.request().Render.Messages), errOut.String())
	}
	if s.command("a question") {
		t.Error("a line without / was taken as a command")
	}
}

// The demo model was trained without thinking: `--think on` answers with
// thinking off (the reference answer, not template text) and says why, and
// /think on in a demo session only says so.
func TestChatDemoIgnoresThinkOn(t *testing.T) {
	const question = "What does json.dumps do?"
	stdout, stderr := runChatProcess(t, question+"\n", "--temperature", "0", "--think", "on")
	if want := chatReference(t, question) + "\n\n"; stdout != want {
		t.Errorf("stdout:\n%q\nwant the thinking-off reference answer:\n%q", stdout, want)
	}
	if !strings.Contains(stderr, demoThinkNote) {
		t.Errorf("stderr lacks the note %q:\n%s", demoThinkNote, stderr)
	}

	var errOut bytes.Buffer
	s := &chatSession{out: &bytes.Buffer{}, errOut: &errOut, demo: true}
	if !s.command("/think on") || s.think || !strings.Contains(errOut.String(), demoThinkNote) {
		t.Errorf("/think on with the demo model: think %v, stderr %q", s.think, errOut.String())
	}
}
