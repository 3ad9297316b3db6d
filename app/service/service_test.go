package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/store"
	"github.com/suzuran-app/suzuran/assets/models"
)

// demoDir installs the demo model Suzuran Tiny once for the package's
// tests: a real model folder that answers questions about Python.
var demoDir = sync.OnceValues(func() (string, error) {
	root, err := os.MkdirTemp("", "suzuran-service-test-")
	if err != nil {
		return "", err
	}
	return models.Install(root)
})

// tinyDir is the random-weight fixture model: it never says EOS in
// practice, so its replies run as long as a test needs.
const tinyDir = "../../engine/internal/fixtures/testdata/qwen35moe-tiny/hf-bf16"

type testService struct {
	*Service
	ui       *UI
	settings string
}

func newTestService(t *testing.T, modelDir string) *testService {
	t.Helper()
	dir := t.TempDir()
	svc, err := Open(Options{
		DatabasePath: filepath.Join(dir, "suzuran.db"),
		SettingsPath: filepath.Join(dir, "settings.json"),
		PrefixDir:    filepath.Join(dir, "prefix"),
		Model:        modelDir,
		Backend:      "cpu",
		Threads:      1,
		Version:      "test",
		Log:          zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	waitModel(t, svc, modelhost.StateReady)
	return &testService{Service: svc, ui: svc.UI(), settings: filepath.Join(dir, "settings.json")}
}

// awaitEvent waits, within timeout, until done holds: it checks done once
// at once and again after each event of svc, which every change it waits
// for publishes (done gets nil for the first check).
func awaitEvent(t *testing.T, svc *Service, timeout time.Duration, what string, done func(*Event) bool) {
	t.Helper()
	events, stop := svc.Subscribe()
	defer stop()
	if done(nil) {
		return
	}
	expired := time.After(timeout)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the event stream closed while waiting for %s", what)
			}
			if done(&ev) {
				return
			}
		case <-expired:
			t.Fatalf("no %s within %v", what, timeout)
		}
	}
}

func waitModel(t *testing.T, svc *Service, state string) modelhost.ModelState {
	t.Helper()
	var m modelhost.ModelState
	awaitEvent(t, svc, 60*time.Second, "model state "+state, func(*Event) bool {
		m = svc.ModelState()
		if m.State == modelhost.StateError && state != modelhost.StateError {
			t.Fatalf("model state %+v, waiting for %s", m, state)
		}
		return m.State == state
	})
	return m
}

// waitReply waits until the reply is no longer streaming and returns it.
func waitReply(t *testing.T, svc *Service, id int64) store.Message {
	t.Helper()
	var m store.Message
	awaitEvent(t, svc, 60*time.Second, fmt.Sprintf("end of reply %d", id), func(ev *Event) bool {
		if ev != nil && (ev.Type != EventMessage || ev.MessageID != id) {
			return false
		}
		var err error
		if m, err = svc.store.Message(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return m.Status != store.StatusStreaming
	})
	return m
}

// waitGrowth waits until a reply holds more than n bytes of text (the
// reply events say where their text goes: more than n UTF-16 units are
// more than n bytes).
func waitGrowth(t *testing.T, svc *Service, id int64, n int) {
	t.Helper()
	awaitEvent(t, svc, 30*time.Second, fmt.Sprintf("reply %d past %d bytes", id, n), func(ev *Event) bool {
		if ev == nil {
			m, _ := svc.store.Message(context.Background(), id)
			return len(m.Content)+len(m.Reasoning) > n
		}
		return ev.Type == EventReply && ev.MessageID == id &&
			ev.ContentAt+utf16Len(ev.Content)+ev.ReasoningAt+utf16Len(ev.Reasoning) > n
	})
}

func demo(t *testing.T) string {
	dir, err := demoDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestSendStreamsBatchedAndSaves(t *testing.T) {
	s := newTestService(t, demo(t))
	state := s.ui.State()
	if !state.Model.Demo || state.Model.Name != models.DemoName || state.Version != "test" {
		t.Fatalf("state %+v: want the demo model, version test", state)
	}
	events, cancel := s.Subscribe()
	defer cancel()
	res, err := s.ui.Send(SendRequest{Text: "What does json.dumps do?", Think: false})
	if err != nil {
		t.Fatal(err)
	}
	if res.Conversation.Title != "What does json.dumps do?" || res.Reply.Status != store.StatusStreaming {
		t.Fatalf("send result %+v", res)
	}
	var streamed strings.Builder
	var replies, prefill, prefillDone int
	var final *store.Message
	for final == nil {
		select {
		case ev := <-events:
			switch {
			case ev.Type == EventReply && ev.MessageID == res.Reply.ID:
				replies++
				streamed.WriteString(ev.Content)
			case ev.Type == EventPrefill && ev.MessageID == res.Reply.ID:
				prefill, prefillDone = ev.PromptTokens, ev.PromptDone
			case ev.Type == EventMessage && ev.MessageID == res.Reply.ID && ev.Message.Status != store.StatusStreaming:
				final = ev.Message
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no final message within 60 s")
		}
	}
	if final.Status != store.StatusComplete || final.Stats == nil {
		t.Fatalf("final reply %+v", final)
	}
	// The demo model knows json.dumps: its answer names JSON.
	if !strings.Contains(strings.ToLower(final.Content), "json") {
		t.Errorf("the demo model's answer %q does not mention JSON", final.Content)
	}
	if streamed.String() != final.Content {
		t.Errorf("streamed text %q differs from the saved reply %q", streamed.String(), final.Content)
	}
	// The engine's last report comes before the pass that reads the
	// prompt's last token and samples the first answer token.
	if prefill == 0 || prefill != final.Stats.PromptTokens || prefillDone < prefill-1 {
		t.Errorf("last prefill event said %d of %d prompt tokens read, stats %d", prefillDone, prefill, final.Stats.PromptTokens)
	}
	// Batching: one reply event per flush at most, never one per token
	// beyond the token count (the demo writes faster than 30 ms a token,
	// so several tokens share an event).
	if replies == 0 || replies > final.Stats.GeneratedTokens {
		t.Errorf("%d reply events for %d tokens", replies, final.Stats.GeneratedTokens)
	}
	t.Logf("%d tokens in %d reply events, %.0f tok/s, first token after %.1f ms",
		final.Stats.GeneratedTokens, replies, final.Stats.TokensPerSecond, final.Stats.TimeToFirstMS)

	view, err := s.ui.Conversation(res.Conversation.ID)
	if err != nil || len(view.Messages) != 2 || view.Messages[1].Content != final.Content {
		t.Fatalf("stored conversation %+v, %v", view, err)
	}

	// A second turn in the same conversation reuses the cached prompt.
	res2, err := s.ui.Send(SendRequest{ConversationID: res.Conversation.ID, Text: "And json.loads?"})
	if err != nil {
		t.Fatal(err)
	}
	second := waitReply(t, s.Service, res2.Reply.ID)
	if second.Stats == nil || second.Stats.CachedTokens == 0 {
		t.Errorf("second turn stats %+v: want cached prompt tokens", second.Stats)
	}
}

func TestStopRegenerateEditContinue(t *testing.T) {
	s := newTestService(t, tinyDir)
	// The random-weight model says EOS now and then; at the full model's
	// pace its replies last long enough to be stopped.
	s.pace = 10 * time.Millisecond
	res, err := s.ui.Send(SendRequest{Text: "Write a long story", Think: true})
	if err != nil {
		t.Fatal(err)
	}
	// Let some text arrive, then stop.
	waitGrowth(t, s.Service, res.Reply.ID, 0)
	if _, err := s.ui.Send(SendRequest{ConversationID: res.Conversation.ID, Text: "again"}); err == nil {
		t.Error("a second question was accepted while a reply was being written")
	}
	s.ui.Stop(res.Conversation.ID)
	stopped := waitReply(t, s.Service, res.Reply.ID)
	if stopped.Status != store.StatusStopped || stopped.Stats == nil || stopped.Stats.FinishReason != "cancelled" {
		t.Fatalf("after Stop: %+v", stopped)
	}
	// The reply says which model wrote it and how long it thought.
	if stopped.Stats.Model == "" || (stopped.Reasoning != "" && stopped.Stats.ThinkingMS <= 0) {
		t.Errorf("stopped reply's stats %+v: want the model's name and the thinking time", stopped.Stats)
	}
	// The paced window runs behind the engine; the stopped reply counts
	// only the tokens it shows (each shown as at least one character; the
	// thinking tags, which the text leaves out, are a few tokens more).
	if shown := utf8.RuneCountInString(stopped.Reasoning + stopped.Content); stopped.Stats.GeneratedTokens > shown+4 {
		t.Errorf("the stopped reply shows %d characters but counts %d tokens", shown, stopped.Stats.GeneratedTokens)
	}

	// Continue goes on from the stopped text.
	cont, err := s.ui.Continue(stopped.ID)
	if err != nil {
		t.Fatal(err)
	}
	waitGrowth(t, s.Service, cont.ID, len(stopped.Reasoning)+len(stopped.Content))
	s.ui.Stop(res.Conversation.ID)
	continued := waitReply(t, s.Service, cont.ID)
	before := stopped.Reasoning + stopped.Content
	after := continued.Reasoning + continued.Content
	if !strings.HasPrefix(continued.Reasoning, stopped.Reasoning) || len(after) <= len(before) {
		t.Errorf("Continue did not extend the reply: %d bytes before, %d after", len(before), len(after))
	}

	// Regenerate adds a version of the last reply.
	regen, err := s.ui.Regenerate(res.Conversation.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	waitGrowth(t, s.Service, regen.ID, 0) // the new version is being written
	s.ui.Stop(res.Conversation.ID)
	waitReply(t, s.Service, regen.ID)
	view, _ := s.ui.Conversation(res.Conversation.ID)
	if len(view.Messages) != 2 || view.Messages[1].ID != regen.ID ||
		!slices.Equal(view.Messages[1].Versions, []int64{res.Reply.ID, regen.ID}) {
		t.Fatalf("after Regenerate: %+v", view.Messages)
	}
	// The first version is still there and can be shown.
	view, err = s.ui.ShowVersion(res.Reply.ID)
	if err != nil || len(view.Messages) != 2 || view.Messages[1].Content != continued.Content {
		t.Fatalf("showing the first answer: %+v, %v", view.Messages, err)
	}
	if _, err := s.ui.ShowVersion(regen.ID); err != nil {
		t.Fatal(err)
	}

	// Edit asks the question again as another version of it.
	edited, err := s.ui.Edit(res.Question.ID, "A short story", false)
	if err != nil {
		t.Fatal(err)
	}
	waitGrowth(t, s.Service, edited.Reply.ID, 0) // its answer is being written
	s.ui.Stop(res.Conversation.ID)
	waitReply(t, s.Service, edited.Reply.ID)
	view, _ = s.ui.Conversation(res.Conversation.ID)
	if len(view.Messages) != 2 || view.Messages[0].Content != "A short story" || view.Messages[1].ID != edited.Reply.ID ||
		len(view.Messages[0].Versions) != 2 {
		t.Fatalf("after Edit: %+v", view.Messages)
	}
	// The question before the edit keeps its answers.
	view, err = s.ui.ShowVersion(res.Question.ID)
	if err != nil || len(view.Messages) != 2 || view.Messages[0].Content != "Write a long story" ||
		view.Messages[1].ID != regen.ID || len(view.Messages[1].Versions) != 2 {
		t.Fatalf("showing the question before the edit: %+v, %v", view.Messages, err)
	}
	if _, err := s.ui.Edit(edited.Reply.ID, "x", false); err == nil {
		t.Error("editing a reply was accepted")
	}
}

func TestConversationCalls(t *testing.T) {
	s := newTestService(t, demo(t))
	res, err := s.ui.Send(SendRequest{Text: "What does itertools.pairwise do?"})
	if err != nil {
		t.Fatal(err)
	}
	waitReply(t, s.Service, res.Reply.ID)
	id := res.Conversation.ID
	if err := s.ui.Rename(id, "Pairs"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ui.Conversations("pairwise"); len(list) != 1 || list[0].Title != "Pairs" {
		t.Fatalf("search after rename: %+v", list)
	}
	if err := s.ui.Delete(id); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ui.Conversations(""); len(list) != 0 {
		t.Fatalf("after delete: %+v", list)
	}
	if err := s.ui.Undelete(id); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ui.Conversations(""); len(list) != 1 {
		t.Fatalf("after undo: %+v", list)
	}
	if _, err := s.ui.Send(SendRequest{Text: "   "}); err == nil {
		t.Error("an empty message was accepted")
	}
	if _, err := s.ui.Conversation(9999); err == nil {
		t.Error("a missing conversation was returned")
	}
}

func TestSettingsPersistAndKeepOtherKeys(t *testing.T) {
	s := newTestService(t, demo(t))
	// Another feature's key and the command line's model key.
	if err := os.WriteFile(s.settings, []byte(`{"model": "/models/x", "hub": {"token": "t"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	next := s.ui.Settings()
	next.SystemPrompt = "Answer briefly."
	next.SamplingPreset = PresetCoding
	next.APILAN = true
	next.APICORSOrigins = []string{" http://localhost:3000/ ", ""}
	saved, err := s.ui.SaveSettings(next)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(saved.APIKey, "sk-suzuran-") || len(saved.APIKey) < 40 {
		t.Errorf("exposing the API generated the key %q", saved.APIKey)
	}
	if len(saved.APICORSOrigins) != 1 || saved.APICORSOrigins[0] != "http://localhost:3000" {
		t.Errorf("origins %q", saved.APICORSOrigins)
	}
	var raw map[string]any
	data, _ := os.ReadFile(s.settings)
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["model"] != "/models/x" || raw["hub"] == nil || raw["system_prompt"] != "Answer briefly." {
		t.Errorf("settings.json after saving: %s", data)
	}
	// A fresh read gets the same settings.
	got, _, err := settingsFile{s.settings}.load()
	if err != nil || got.SystemPrompt != "Answer briefly." || got.APIKey != saved.APIKey || got.SamplingPreset != PresetCoding {
		t.Errorf("reloaded %+v, %v", got, err)
	}
	if got := got.SamplingFor(true); got.Temperature != 0.6 || got.PresencePenalty != 0 {
		t.Errorf("coding preset sampling %+v", got)
	}

	bad := []func(*Settings){
		func(s *Settings) { s.APIPort = 0 },
		func(s *Settings) { s.SamplingPreset = "wild" },
		func(s *Settings) { s.SamplingPreset, s.Custom.TopP = PresetCustom, 0 },
		func(s *Settings) { s.Custom.Temperature = -1 },
		func(s *Settings) { s.ContextTokens = 100 },
		func(s *Settings) { s.APICORSOrigins = []string{"localhost:3000"} },
		func(s *Settings) { s.KeepAliveMinutes = -5 },
		func(s *Settings) { s.GlobalShortcut = "Shift+K" },
	}
	for i, change := range bad {
		next := saved
		change(&next)
		if _, err := s.ui.SaveSettings(next); err == nil {
			t.Errorf("bad settings %d were accepted: %+v", i, next)
		}
	}
	after, _ := os.ReadFile(s.settings)
	if string(after) != string(data) {
		t.Errorf("rejected settings changed the file:\n%s\nwas\n%s", after, data)
	}
}

func TestBrokenSettingsFileIsReportedNotLost(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	os.WriteFile(path, []byte(`{"model": `), 0o600)
	if _, _, err := (settingsFile{path}).load(); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("loading a broken file: %v", err)
	}
	if err := (settingsFile{path}).save(DefaultSettings()); err == nil {
		t.Fatal("saving over a broken file succeeded; it would lose what the user wrote")
	}
	if data, _ := os.ReadFile(path); string(data) != `{"model": ` {
		t.Errorf("the broken file was changed: %q", data)
	}
}

func TestModelErrorIsReported(t *testing.T) {
	dir := t.TempDir()
	svc, err := Open(Options{
		DatabasePath: filepath.Join(dir, "db"), SettingsPath: filepath.Join(dir, "settings.json"),
		Model: filepath.Join(dir, "no-such-model"), Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	m := waitModel(t, svc, modelhost.StateError)
	if !strings.Contains(m.Error, "no-such-model") {
		t.Errorf("error %q does not name the folder", m.Error)
	}
	if st := svc.Models().Status(); st.State != modelhost.StateError || st.Error == "" {
		t.Errorf("server status %+v", st)
	}
	res, err := svc.UI().Send(SendRequest{Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if r := waitReply(t, svc, res.Reply.ID); r.Status != store.StatusError || !strings.Contains(r.Error, "could not load") {
		t.Errorf("reply with a broken model: %+v", r)
	}
}

// The daily update check is on for a settings file written before the
// switch existed (the key absent), and off once the user turns it off.
func TestCheckForUpdatesSetting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(path, []byte(`{"model": "/models/x", "system_prompt": "Be brief."}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, err := settingsFile{path}.load()
	if err != nil || !got.CheckForUpdates || got.SystemPrompt != "Be brief." {
		t.Fatalf("an older settings file: %+v, %v; want the check on", got, err)
	}
	if err := os.WriteFile(path, []byte(`{"check_for_updates": false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _, err := (settingsFile{path}).load(); err != nil || got.CheckForUpdates {
		t.Errorf("switched off: %+v, %v", got, err)
	}
}

// TestGlobalShortcutSetting: the shortcut is saved in its canonical form
// and taken through Options.Shortcut before it is saved; one the system
// refuses, or one that does not parse, leaves the settings as they were
// with an error that says why; a failure at start shows in the state until
// another shortcut is saved. Without Options.Shortcut (Linux, a browser)
// the state says there is none here. The system's side is a recording
// function: the real one, Carbon's, exists only on a Mac.
func TestGlobalShortcutSetting(t *testing.T) {
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.json")
	var taken []string
	refused := map[string]bool{"Cmd+Space": true}
	svc, err := Open(Options{
		DatabasePath: filepath.Join(dir, "suzuran.db"), SettingsPath: settings, Model: demo(t),
		Backend: "cpu", Threads: 1, Log: zerolog.Nop(),
		Shortcut: func(s string) error {
			if refused[s] {
				return errors.New(s + " is taken by another app or by macOS: choose another shortcut in Settings")
			}
			taken = append(taken, s)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ui := svc.UI()
	if got := ui.Settings().GlobalShortcut; got != "Option+Space" {
		t.Errorf("default shortcut %q, want Option+Space", got)
	}
	if state := ui.State().Shortcut; !state.Available || state.Error != "" {
		t.Errorf("shortcut state %+v, want available", state)
	}
	if err := svc.ApplyShortcut(); err != nil || len(taken) != 1 || taken[0] != "Option+Space" {
		t.Fatalf("ApplyShortcut: %v, taken %q", err, taken)
	}

	next := ui.Settings()
	next.GlobalShortcut = "cmd + shift + k"
	saved, err := ui.SaveSettings(next)
	if err != nil || saved.GlobalShortcut != "Shift+Cmd+K" || taken[len(taken)-1] != "Shift+Cmd+K" {
		t.Fatalf("SaveSettings(cmd + shift + k) = %q, %v; taken %q", saved.GlobalShortcut, err, taken)
	}
	reread, _, _ := settingsFile{settings}.load()
	if reread.GlobalShortcut != "Shift+Cmd+K" {
		t.Errorf("settings.json holds the shortcut %q", reread.GlobalShortcut)
	}

	for _, tc := range []struct{ shortcut, want string }{
		{"Cmd+Space", "taken by another app"},
		{"K", "needs Ctrl, Option or Cmd"},
		{"Cmd+Banana", `"Banana" is not a key`},
	} {
		before := len(taken)
		bad := saved
		bad.GlobalShortcut = tc.shortcut
		if _, err := ui.SaveSettings(bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SaveSettings(%q): %v, want an error saying %q", tc.shortcut, err, tc.want)
		}
		if ui.Settings().GlobalShortcut != "Shift+Cmd+K" || len(taken) != before {
			t.Errorf("after refusing %q the shortcut is %q (taken %q)", tc.shortcut, ui.Settings().GlobalShortcut, taken)
		}
		if reread, _, _ := (settingsFile{settings}).load(); reread.GlobalShortcut != "Shift+Cmd+K" {
			t.Errorf("after refusing %q settings.json holds %q", tc.shortcut, reread.GlobalShortcut)
		}
	}

	// None: nothing is registered.
	off := saved
	off.GlobalShortcut = ""
	if saved, err := ui.SaveSettings(off); err != nil || saved.GlobalShortcut != "" || taken[len(taken)-1] != "" {
		t.Errorf("turning the shortcut off: %q %v, taken %q", saved.GlobalShortcut, err, taken)
	}

	// Refused at start: the state says why, until another is saved.
	refused["Option+Space"] = true
	back := off
	back.GlobalShortcut = "Ctrl+Option+S"
	if _, err := ui.SaveSettings(back); err != nil {
		t.Fatal(err)
	}
	refused["Ctrl+Option+S"] = true
	if err := svc.ApplyShortcut(); err == nil || !strings.Contains(ui.State().Shortcut.Error, "Ctrl+Option+S is taken") {
		t.Errorf("ApplyShortcut of a refused shortcut: %v, state %+v", err, ui.State().Shortcut)
	}
	back.GlobalShortcut = "Ctrl+Option+T"
	if _, err := ui.SaveSettings(back); err != nil || ui.State().Shortcut.Error != "" {
		t.Errorf("after saving another shortcut: %v, state %+v", err, ui.State().Shortcut)
	}

	plain := newTestService(t, demo(t))
	if state := plain.ui.State().Shortcut; state.Available {
		t.Errorf("without Options.Shortcut the state says %+v", state)
	}
}

// TestSavingAPISettingsUnderServe: under suzuran serve the API is the
// server's own; saving its port, exposure and origins stores them without
// an error about restarting an API this process does not manage.
func TestSavingAPISettingsUnderServe(t *testing.T) {
	s := newTestService(t, demo(t))
	s.SetServedAPI("http://127.0.0.1:11435", false)
	next := s.ui.Settings()
	next.APIPort, next.APILAN, next.APICORSOrigins = 9999, true, []string{"http://localhost:3000"}
	saved, err := s.ui.SaveSettings(next)
	if err != nil {
		t.Fatalf("saving under serve: %v", err)
	}
	if saved.APIPort != 9999 || saved.APIKey == "" || s.ui.Settings().APIPort != 9999 {
		t.Errorf("saved %+v", saved)
	}
	if st := s.APIState(); !st.Enabled || st.URL != "http://127.0.0.1:11435" {
		t.Errorf("the served API's state changed: %+v", st)
	}
}

// The presets are the model card's (engine/sample), in the decimals the
// card writes: the Settings view shows and saves 0.95, not float32's
// 0.949999988.
func TestSamplingPresetsAreTheModelCards(t *testing.T) {
	for _, tc := range []struct {
		preset   string
		thinking bool
		want     Sampling
	}{
		{PresetAuto, true, Sampling{Temperature: 1, TopP: 0.95, TopK: 20, PresencePenalty: 1.5}},
		{PresetAuto, false, Sampling{Temperature: 0.7, TopP: 0.8, TopK: 20, PresencePenalty: 1.5}},
		{PresetThinking, false, Sampling{Temperature: 1, TopP: 0.95, TopK: 20, PresencePenalty: 1.5}},
		{PresetNonThinking, true, Sampling{Temperature: 0.7, TopP: 0.8, TopK: 20, PresencePenalty: 1.5}},
		{PresetCoding, true, Sampling{Temperature: 0.6, TopP: 0.95, TopK: 20}},
	} {
		s := DefaultSettings()
		s.SamplingPreset = tc.preset
		if got := s.SamplingFor(tc.thinking); got != tc.want {
			t.Errorf("%s (thinking %v): %+v, want %+v", tc.preset, tc.thinking, got, tc.want)
		}
	}
	if c := DefaultSettings().Custom; c != (Sampling{Temperature: 0.7, TopP: 0.8, TopK: 20, PresencePenalty: 1.5}) {
		t.Errorf("the custom values start as %+v, want the non-thinking preset", c)
	}
}

// The engine runs at the precision Options.Precision names (`suzuran serve
// --precision` with the chat UI), as `serve --no-ui` does.
func TestPrecisionReachesTheEngine(t *testing.T) {
	for _, precision := range []string{"exact", "fast"} {
		dir := t.TempDir()
		svc, err := Open(Options{
			DatabasePath: filepath.Join(dir, "suzuran.db"), SettingsPath: filepath.Join(dir, "settings.json"),
			Model: tinyDir, Backend: "cpu", Threads: 1, Precision: precision, Log: zerolog.Nop(),
		})
		if err != nil {
			t.Fatal(err)
		}
		m := waitModel(t, svc, modelhost.StateReady)
		svc.Close()
		if !strings.Contains(m.Backend, precision+" precision") {
			t.Errorf("precision %q: the engine runs %q", precision, m.Backend)
		}
	}
}
