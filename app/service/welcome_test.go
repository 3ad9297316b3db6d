package service

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/internal/fakehub"
	"github.com/suzuran-app/suzuran/app/modelhost"
)

// tinyMLX is the tiny fixture model in MLX's 4-bit format, the layout of
// the real model's repository; the fake hub serves it.
const (
	tinyMLX    = "../../engine/internal/fixtures/testdata/qwen35moe-tiny/mlx-4bit"
	tinyRepo   = "test-org/qwen35moe-tiny"
	tinyWeight = "model.safetensors"
)

// withHub starts a fake hub holding the tiny model and points the
// service's hub client at it, with an empty cache of the test's own.
func withHub(t *testing.T) (*fakehub.Hub, string) {
	t.Helper()
	h := fakehub.New(t)
	h.AddDir(t, tinyRepo, tinyMLX)
	cache := filepath.Join(t.TempDir(), "hub")
	t.Setenv("HF_ENDPOINT", h.URL)
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	return h, cache
}

// downloadEvents collects the download states published from now on.
func downloadEvents(t *testing.T, svc *Service) func(until func(DownloadState) bool) []DownloadState {
	events, stop := svc.Subscribe()
	t.Cleanup(stop)
	var seen []DownloadState
	return func(until func(DownloadState) bool) []DownloadState {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatal("event subscription closed")
				}
				if ev.Type != EventDownload {
					continue
				}
				seen = append(seen, *ev.Download)
				if until(*ev.Download) {
					return seen
				}
			case <-timeout:
				t.Fatalf("download did not reach the expected state; states seen: %+v", seen)
			}
		}
	}
}

func TestWelcomeExplainsThePlan(t *testing.T) {
	_, cache := withHub(t)
	ts := newTestService(t, demoModel(t))
	info := ts.ui.Welcome(tinyRepo)
	if info.Error != "" {
		t.Fatalf("Welcome: %s (%s)", info.Error, info.ErrorKind)
	}
	var want int64
	entries, _ := os.ReadDir(tinyMLX)
	for _, e := range entries {
		st, _ := e.Info()
		want += st.Size()
	}
	// The hub adds a .gitattributes and a README.md to every repository.
	if info.Size < want || info.ToDownload != info.Size || info.Cached {
		t.Errorf("size %d, to download %d, cached %v; want at least %d of the fixture's bytes, all to download", info.Size, info.ToDownload, info.Cached, want)
	}
	if !strings.HasPrefix(info.Dir, cache) {
		t.Errorf("model goes to %s, want under the cache %s", info.Dir, cache)
	}
	if info.FreeDisk <= 0 || info.FreeDiskText == "" || info.SizeText == "" {
		t.Errorf("free disk %d %q, size %q: want them known", info.FreeDisk, info.FreeDiskText, info.SizeText)
	}
	// The tiny model fits any machine that runs these tests: no check may
	// refuse it, and each says something.
	if !info.CanRun {
		t.Errorf("machine check refuses the tiny model: %+v", info.Findings)
	}
	checks := map[string]bool{}
	for _, f := range info.Findings {
		checks[f.Check] = true
		if f.Message == "" || (f.Level != "ok" && f.Level != "warning") {
			t.Errorf("finding %+v: want a message and level ok or warning", f)
		}
	}
	if !checks["memory"] || !checks["disk"] {
		t.Errorf("findings %+v: want the memory and disk checks", info.Findings)
	}
	if d := info.Download; d.State != DownloadIdle {
		t.Errorf("download state %q before any download, want idle", d.State)
	}
}

func TestDownloadCompletesAndSwitchesModel(t *testing.T) {
	h, _ := withHub(t)
	// Slow enough for several progress reports, fast enough for a test.
	h.SetFault(tinyWeight, fakehub.Fault{BytesPerSecond: 1_000_000})
	ts := newTestService(t, demoModel(t))
	next := downloadEvents(t, ts.Service)
	if _, err := ts.ui.StartDownload(tinyRepo); err != nil {
		t.Fatal(err)
	}
	states := next(func(d DownloadState) bool { return d.State == DownloadDone || d.State == DownloadFailed })
	final := states[len(states)-1]
	if final.State != DownloadDone {
		t.Fatalf("download ended %+v", final)
	}
	var running int
	last := -1.0
	for _, d := range states {
		if d.State != DownloadRunning {
			continue
		}
		running++
		if d.Fraction < last {
			t.Errorf("progress went back from %.3f to %.3f", last, d.Fraction)
		}
		last = d.Fraction
		if d.Total > 0 && d.Fraction < 1 && !strings.Contains(d.Line, "%") {
			t.Errorf("tray line %q has no percent", d.Line)
		}
	}
	if running < 3 {
		t.Errorf("%d progress reports while downloading, want several: %+v", running, states)
	}
	m := waitModel(t, ts.Service, modelhost.StateReady)
	if m.Dir != final.Dir || m.Name != tinyRepo || m.Demo {
		t.Errorf("model after the download %+v, want %s named %s", m, final.Dir, tinyRepo)
	}
	raw, err := os.ReadFile(ts.settings)
	if err != nil {
		t.Fatal(err)
	}
	var saved map[string]any
	json.Unmarshal(raw, &saved)
	if saved["model"] != final.Dir {
		t.Errorf("settings model %v, want %s", saved["model"], final.Dir)
	}
	// The new model answers.
	res, err := ts.ui.Send(SendRequest{Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if reply := waitReply(t, ts.Service, res.Reply.ID); reply.Content == "" && reply.Reasoning == "" {
		t.Errorf("the downloaded model wrote nothing: %+v", reply)
	}

	// The picker lists it as current, and the demo; choosing the demo
	// switches back and clears the setting.
	choices, err := ts.ui.Models()
	if err != nil {
		t.Fatal(err)
	}
	var demo, downloaded *ModelChoice
	for i := range choices {
		switch {
		case choices[i].Demo:
			demo = &choices[i]
		case choices[i].Name == tinyRepo:
			downloaded = &choices[i]
		}
	}
	if demo == nil || downloaded == nil || !downloaded.Current || !downloaded.Valid || demo.Current {
		t.Fatalf("models %+v: want the demo and the current, valid %s", choices, tinyRepo)
	}
	if _, err := ts.ui.UseModel(""); err != nil {
		t.Fatal(err)
	}
	if m := waitModel(t, ts.Service, modelhost.StateReady); !m.Demo {
		t.Errorf("after choosing the demo the model is %+v", m)
	}
	raw, _ = os.ReadFile(ts.settings)
	json.Unmarshal(raw, &saved)
	if saved["model"] != "" {
		t.Errorf("settings model %v after choosing the demo, want empty", saved["model"])
	}
}

func TestDownloadPausesAndResumesWithRange(t *testing.T) {
	h, _ := withHub(t)
	h.SetFault(tinyWeight, fakehub.Fault{BytesPerSecond: 200_000}) // about 7 s for the weights
	ts := newTestService(t, demoModel(t))
	next := downloadEvents(t, ts.Service)
	if _, err := ts.ui.StartDownload(tinyRepo); err != nil {
		t.Fatal(err)
	}
	next(func(d DownloadState) bool { return d.State == DownloadRunning && d.Done > 200_000 })
	paused := ts.ui.PauseDownload()
	if paused.State != DownloadPaused || paused.Done <= 0 || paused.Fraction >= 1 {
		t.Fatalf("after pausing %+v, want paused part-way", paused)
	}
	if !strings.Contains(paused.Line, "paused") {
		t.Errorf("tray line %q does not say paused", paused.Line)
	}
	sentBefore := h.Sent(tinyWeight)
	h.SetFault(tinyWeight, fakehub.Fault{})
	if _, err := ts.ui.StartDownload(tinyRepo); err != nil {
		t.Fatal(err)
	}
	final := next(func(d DownloadState) bool { return d.State == DownloadDone || d.State == DownloadFailed })
	if d := final[len(final)-1]; d.State != DownloadDone {
		t.Fatalf("resumed download ended %+v", d)
	}
	ranges := h.Ranges(tinyWeight)
	if len(ranges) < 2 || !strings.HasPrefix(ranges[len(ranges)-1], "bytes=") {
		t.Fatalf("weight requests' ranges %q: want the resume to ask for a range", ranges)
	}
	from, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(ranges[len(ranges)-1], "bytes="), "-"), 10, 64)
	if from <= 0 {
		t.Errorf("resume asked for %q, want a range starting past 0", ranges[len(ranges)-1])
	}
	st, _ := os.Stat(filepath.Join(tinyMLX, tinyWeight))
	// Everything sent counts what was in flight when the pause came; it
	// must still be less than the file twice over (nothing re-fetched).
	if total := h.Sent(tinyWeight); total >= 2*st.Size() || sentBefore == 0 {
		t.Errorf("sent %d bytes of a %d-byte file (%d before the pause)", total, st.Size(), sentBefore)
	}
	waitModel(t, ts.Service, modelhost.StateReady)
}

func TestDownloadErrorsSayWhatToDo(t *testing.T) {
	other := map[string][]byte{"config.json": []byte(`{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}`)}
	for _, tc := range []struct {
		name, repo, kind string
		setup            func(h *fakehub.Hub)
	}{
		{"missing repository", "test-org/no-such-model", "notFound", nil},
		{"another architecture", "test-org/llama", "architecture", func(h *fakehub.Hub) { h.Add("test-org/llama", other) }},
		{"gated repository", tinyRepo, "auth", func(h *fakehub.Hub) { h.SetAPIFault(fakehub.Fault{Status: 403}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := withHub(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			ts := newTestService(t, demoModel(t))
			next := downloadEvents(t, ts.Service)
			if _, err := ts.ui.StartDownload(tc.repo); err != nil {
				t.Fatal(err)
			}
			states := next(func(d DownloadState) bool { return d.State == DownloadDone || d.State == DownloadFailed })
			d := states[len(states)-1]
			if d.State != DownloadFailed || d.ErrorKind != tc.kind || d.Error == "" {
				t.Fatalf("download ended %+v, want an error of kind %s", d, tc.kind)
			}
			// The demo keeps working and stays the model.
			if m := ts.ModelState(); !m.Demo || m.State != modelhost.StateReady {
				t.Errorf("model after a failed download %+v, want the demo, ready", m)
			}
			if info := ts.ui.Welcome(tc.repo); info.ErrorKind != tc.kind && tc.kind != "architecture" {
				t.Errorf("Welcome error kind %q (%s), want %s", info.ErrorKind, info.Error, tc.kind)
			}
		})
	}
}

// TestWelcomeSaysTheHubCannotBeReached: with the hub's connection refused
// or its name unknown, the welcome view hears "network" (its "Hugging Face
// could not be reached") at once, not the 30 s deadline's bare error, and
// so does a download started then. The 2 s bound leaves a loaded machine
// ample room over the milliseconds the answer takes.
func TestWelcomeSaysTheHubCannotBeReached(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	for name, endpoint := range map[string]string{"connection refused": refused, "unknown name": "http://hub.invalid"} {
		t.Run(name, func(t *testing.T) {
			withHub(t)
			t.Setenv("HF_ENDPOINT", endpoint)
			ts := newTestService(t, demoModel(t))
			start := time.Now()
			info := ts.ui.Welcome(tinyRepo)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Welcome took %s, want under 2 s", took)
			}
			if info.ErrorKind != "network" || !strings.Contains(info.Error, "cannot reach "+endpoint) {
				t.Fatalf("Welcome: kind %q, error %q; want network, naming %s", info.ErrorKind, info.Error, endpoint)
			}
			// The machine check needs no network: for the default model
			// it judges the model's usual size.
			start = time.Now()
			def := ts.ui.Welcome("")
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Welcome of the default model took %s, want under 2 s", took)
			}
			if def.ErrorKind != "network" || !def.Estimated || len(def.Findings) == 0 || def.SizeText != "20.4 GB" {
				t.Fatalf("Welcome of the default model offline: %+v; want the network error with an estimated machine check", def)
			}
			next := downloadEvents(t, ts.Service)
			start = time.Now()
			if _, err := ts.ui.StartDownload(tinyRepo); err != nil {
				t.Fatal(err)
			}
			states := next(func(d DownloadState) bool { return d.State == DownloadDone || d.State == DownloadFailed })
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the download took %s to fail, want under 2 s", took)
			}
			if d := states[len(states)-1]; d.State != DownloadFailed || d.ErrorKind != "network" {
				t.Errorf("download ended %+v, want failed with kind network", d)
			}
		})
	}
}

func TestUseModelRefusesBrokenFolderNamingTheFile(t *testing.T) {
	withHub(t)
	ts := newTestService(t, demoModel(t))
	broken := t.TempDir()
	entries, _ := os.ReadDir(tinyMLX)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(tinyMLX, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == tinyWeight {
			data = data[:len(data)/2] // a download cut short
		}
		os.WriteFile(filepath.Join(broken, e.Name()), data, 0o644)
	}
	before, _ := os.ReadFile(ts.settings)
	c, err := ts.ui.UseModel(broken)
	if err == nil || c.Valid {
		t.Fatalf("UseModel of a truncated model: %+v, %v; want an error", c, err)
	}
	if !strings.Contains(err.Error(), tinyWeight) {
		t.Errorf("error %q does not name %s", err, tinyWeight)
	}
	after, _ := os.ReadFile(ts.settings)
	if string(before) != string(after) {
		t.Errorf("settings changed by a refused model: %s -> %s", before, after)
	}
	if m := ts.ModelState(); !m.Demo {
		t.Errorf("model %+v after a refused folder, want the demo still", m)
	}
	// A valid folder typed by hand is accepted.
	if _, err := ts.ui.UseModel(tinyMLX); err != nil {
		t.Fatal(err)
	}
	if m := waitModel(t, ts.Service, modelhost.StateReady); m.Demo {
		t.Errorf("model %+v after choosing the tiny folder", m)
	}
}

func demoModel(t *testing.T) string {
	t.Helper()
	dir, err := demoDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWelcomeOpensByItselfUntilDismissed: on the demo model the window is
// asked to open the welcome view, until the user leaves it once; that is
// remembered in settings.json (beside the keys already there, and through
// a save of the settings view) across restarts. On a real model it is not
// asked for.
func TestWelcomeOpensByItselfUntilDismissed(t *testing.T) {
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(settings, []byte(`{"someone_elses_key": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(model string) *Service {
		t.Helper()
		svc, err := Open(Options{DatabasePath: filepath.Join(dir, "suzuran.db"), SettingsPath: settings,
			Model: model, Backend: "cpu", Threads: 1, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		waitModel(t, svc, modelhost.StateReady)
		return svc
	}
	svc := open(demo(t))
	if !svc.UI().State().ShowWelcome {
		t.Fatal("the first run on the demo model does not ask for the welcome view")
	}
	if err := svc.UI().DismissWelcome(); err != nil {
		t.Fatal(err)
	}
	if svc.UI().State().ShowWelcome {
		t.Error("the welcome view is still asked for after it was dismissed")
	}
	// A save from the settings view keeps it.
	if _, err := svc.SaveSettings(svc.Settings()); err != nil {
		t.Fatal(err)
	}
	svc.Close()
	var raw map[string]any
	data, _ := os.ReadFile(settings)
	if err := json.Unmarshal(data, &raw); err != nil || raw["welcome_seen"] != true || raw["someone_elses_key"] != float64(7) {
		t.Errorf("settings.json after dismissing: %s (%v)", data, err)
	}

	svc = open(demo(t))
	if svc.UI().State().ShowWelcome {
		t.Error("the welcome view is asked for again after a restart")
	}
	svc.Close()

	os.Remove(settings)
	svc = open(tinyDir)
	defer svc.Close()
	if svc.UI().State().ShowWelcome {
		t.Error("the welcome view is asked for on a real model")
	}
}
