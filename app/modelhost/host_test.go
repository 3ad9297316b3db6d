package modelhost

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
)

// fixtureDir is the tiny random-weight model: it loads in milliseconds.
var fixtureDir = filepath.Join("..", "..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")

func TestName(t *testing.T) {
	for _, tc := range []struct {
		about, dir, want string
		demo             bool
	}{
		{"the installed demo model", filepath.Join("/cache/suzuran/models", models.FolderName()), models.DemoName, true},
		{"a hub-cache snapshot", "/home/me/.cache/huggingface/hub/models--mlx-community--Qwen3.6-35B-A3B-4bit/snapshots/5e1b2c", "mlx-community/Qwen3.6-35B-A3B-4bit", false},
		{"a hub-cache snapshot with a trailing slash", "/hub/models--org--name/snapshots/abc/", "org/name", false},
		{"a plain folder", "/models/Qwen3.6-35B-A3B-4bit", "Qwen3.6-35B-A3B-4bit", false},
		{"a plain folder with a trailing slash", "/models/Qwen3.6-35B-A3B-4bit/", "Qwen3.6-35B-A3B-4bit", false},
		{"a folder named snapshots' child without a repository", "/x/snapshots/abc", "abc", false},
	} {
		if got := Name(tc.dir); got != tc.want {
			t.Errorf("%s: Name(%q) = %q, want %q", tc.about, tc.dir, got, tc.want)
		}
		if got := IsDemo(tc.dir); got != tc.demo {
			t.Errorf("%s: IsDemo(%q) = %v", tc.about, tc.dir, got)
		}
		if caps := CapabilitiesOf(tc.dir); caps.Thinking == tc.demo {
			t.Errorf("%s: thinking %v", tc.about, caps.Thinking)
		}
	}
}

// The state names the model by Name, and Current hands that name to the
// API (app's TestModelNameAgrees runs it on a hub-cache snapshot).
func TestCurrentNamesTheModel(t *testing.T) {
	h := New(Options{Load: engine.LoadOptions{Backend: "cpu", Threads: 1}})
	defer h.Close()
	h.Load(fixtureDir)
	st, err := h.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, name, err := h.Current(context.Background())
	if err != nil || st.Name != "mlx-4bit" || name != st.Name {
		t.Fatalf("state %+v, Current's name %q, %v", st, name, err)
	}
}

func TestLoadReportsProgress(t *testing.T) {
	root := t.TempDir()
	demo, err := models.Install(root)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []float64
	h := New(Options{Load: engine.LoadOptions{Backend: "cpu", Threads: 1}, OnChange: func(m ModelState) {
		mu.Lock()
		defer mu.Unlock()
		if m.State == StateLoading {
			seen = append(seen, m.Progress)
		}
	}})
	defer h.Close()
	h.Load(demo)
	if _, err := h.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The demo's 8 MB of weights are read in 4 MB pieces: the start and at
	// least two reports, rising, the last at the 95 % the read stands for
	// (the engine's own start is the rest).
	if len(seen) < 3 || seen[0] != 0 || seen[len(seen)-1] != 0.95 {
		t.Fatalf("progress reports %v", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Fatalf("progress went back: %v", seen)
		}
	}
}

// After the keep-alive time an idle model is unloaded; the API's next
// request starts a reload (and is told it loads), and a window's request
// waits for it and runs.
func TestKeepAliveUnloadsAndReloads(t *testing.T) {
	states := make(chan string, 64)
	h := New(Options{
		Load:      engine.LoadOptions{Backend: "cpu", Threads: 1},
		KeepAlive: func() time.Duration { return 50 * time.Millisecond },
		OnChange:  func(m ModelState) { states <- m.State },
	})
	defer h.Close()
	h.Load(fixtureDir)
	waitState(t, states, StateUnloaded)
	if _, _, err := h.Current(context.Background()); !errors.Is(err, ErrLoading) {
		t.Fatalf("Current after the idle unload: %v, want it to say the model loads", err)
	}
	waitState(t, states, StateReady)
	waitState(t, states, StateUnloaded)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := h.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Held, the model stays loaded past the keep-alive time: the
	// generation on it ends normally.
	time.Sleep(100 * time.Millisecond) // past the keep-alive time: that is the point
	if err := generate(ctx, e); err != nil {
		t.Fatalf("generating on the reloaded model: %v", err)
	}
	if st := h.Status(); st.State != StateReady {
		t.Errorf("state while held: %+v", st)
	}
	h.Release()
	waitState(t, states, StateUnloaded)
}

// waitState waits for the host to report state.
func waitState(t *testing.T, states <-chan string, state string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case s := <-states:
			if s == state {
				return
			}
		case <-timeout:
			t.Fatalf("the host did not reach %s within 60 s", state)
		}
	}
}

// generate runs a two-token answer on e.
func generate(ctx context.Context, e *engine.Engine) error {
	st, err := e.Submit(ctx, engine.Request{Prompt: []int{1, 2, 3}, MaxTokens: 2})
	if err != nil {
		return err
	}
	_, err = st.Result()
	return err
}

// A load that another supersedes hands its engine to nobody and closes
// it, and Close waits for every load under way, so that no engine
// outlives the host.
func TestSupersededLoadAndCloseLeaveNoEngine(t *testing.T) {
	var mu sync.Mutex
	var opened []*engine.Engine
	release, started := make(chan struct{}), make(chan struct{}, 2)
	h := New(Options{Open: func(dir string, opts engine.LoadOptions, check gpucheck.Options) (*engine.Engine, gpucheck.Result, error) {
		mu.Lock()
		first := len(opened) == 0
		opened = append(opened, nil)
		mu.Unlock()
		started <- struct{}{}
		if first {
			<-release
		}
		e, err := engine.Load(dir, opts)
		mu.Lock()
		if first {
			opened[0] = e
		} else {
			opened[1] = e
		}
		mu.Unlock()
		return e, gpucheck.Result{}, err
	}})
	h.Load(fixtureDir)
	<-started // the first load is opening its engine when the second starts
	h.Load(fixtureDir)
	if _, err := h.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	e, err := h.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	close(release)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(opened) != 2 || opened[0] == nil || opened[1] != e {
		t.Fatalf("engines opened %v; the second, %p, is the one served", opened, e)
	}
	for i, e := range opened {
		if err := generate(context.Background(), e); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("engine %d after Close: %v, want it closed", i, err)
		}
	}
	if _, err := h.Acquire(context.Background()); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Acquire after Close: %v", err)
	}
}
