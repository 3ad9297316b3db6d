package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/service"
	"github.com/suzuran-app/suzuran/assets/models"
)

// startLocalAPI opens a service on the demo model, installed in a
// temporary folder, with the given backend ("" for the default), the Local
// API on a free port and a stand-in UI at /, and waits up to 60 s for the
// model to be ready. The API is switched off and the service closed when
// the test ends.
func startLocalAPI(t *testing.T, backend string) (*service.Service, service.APIState) {
	t.Helper()
	demo, err := models.Install(filepath.Join(t.TempDir(), "models"))
	if err != nil {
		t.Fatal(err)
	}
	return startLocalAPIOn(t, backend, demo)
}

// startLocalAPIOn is startLocalAPI on the model folder demo.
func startLocalAPIOn(t *testing.T, backend, demo string) (*service.Service, service.APIState) {
	t.Helper()
	dir := t.TempDir()
	api := &localAPI{log: zerolog.Nop()}
	svc, err := service.Open(service.Options{
		DatabasePath: filepath.Join(dir, "suzuran.db"), SettingsPath: filepath.Join(dir, "settings.json"),
		Model: demo, Backend: backend, API: api, Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	api.models, api.ui = svc.Models(), service.Handler(svc, fstest.MapFS{"index.html": {Data: []byte("<title>Suzuran</title>")}})
	settings := svc.Settings()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	settings.APIPort = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if _, err := svc.SaveSettings(settings); err != nil {
		t.Fatal(err)
	}
	state, err := svc.SetAPIEnabled(true)
	if err != nil || !state.Enabled {
		t.Fatalf("switching the API on: %+v, %v", state, err)
	}
	t.Cleanup(func() { svc.SetAPIEnabled(false) })
	awaitService(t, svc, 60*time.Second, "the model ready", func() bool { return svc.ModelState().State == modelhost.StateReady })
	return svc, state
}

// awaitService waits, within timeout, until done holds: it checks done at
// once and again after each of svc's events, which every change of its
// state publishes.
func awaitService(t *testing.T, svc *service.Service, timeout time.Duration, what string, done func() bool) {
	t.Helper()
	events, stop := svc.Subscribe()
	defer stop()
	expired := time.After(timeout)
	for !done() {
		select {
		case _, ok := <-events:
			if !ok {
				t.Fatalf("the event stream closed while waiting for %s", what)
			}
		case <-expired:
			t.Fatalf("no %s within %v", what, timeout)
		}
	}
}

// The Local API switch runs the real API server with the service's engine
// and the browser UI at /: the UI, its calls and the OpenAI API answer on
// one port while it is on, and nothing after it is off.
func TestLocalAPISwitch(t *testing.T) {
	svc, state := startLocalAPI(t, "")
	url := state.URL
	cases := []struct {
		method, path, body, want string
	}{
		{"GET", "/", "", "<title>Suzuran</title>"},
		{"POST", "/api/call/State", "[]", `"demo":true`},
		{"GET", "/v1/models", "", "Suzuran Tiny"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s = %d %s; want 200 with %s", c.method, c.path, resp.StatusCode, body, c.want)
		}
	}
	if state, err := svc.SetAPIEnabled(false); err != nil || state.Enabled {
		t.Fatalf("switching the API off: %+v, %v", state, err)
	}
	if _, err := http.Get(url + "/"); err == nil {
		t.Error("the port still answers after the API was switched off")
	}

	// Exposed to the network, the server requires the key the settings
	// made.
	settings := svc.Settings()
	settings.APILAN = true
	saved, err := svc.SaveSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	state, err = svc.SetAPIEnabled(true)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(state.URL, "0.0.0.0") {
		t.Errorf("exposed API's URL %s names no address another computer can use", state.URL)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(state.URL, "http://"))
	local := "http://127.0.0.1:" + port
	for _, key := range []string{"", saved.APIKey} {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", local+"/v1/models", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: 401, true: 200}[key != ""]; resp.StatusCode != want {
			t.Errorf("exposed API with key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}
}
