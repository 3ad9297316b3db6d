// Package service is the one API the chat UI calls: conversations, sending,
// stopping, regenerating and editing messages, settings, and the state of
// the model and of the local API.
//
// A Service owns the app's model host (app/modelhost: the engine loaded in
// the background with progress, unloaded after the keep-alive time,
// reloaded on the next message, errors reported instead of exiting), its
// conversation database (app/store) and its settings (settings.json
// through app/settings; the keys settings.go defines). Its UI value
// holds the calls the window makes; the desktop window reaches them through
// Wails bindings, a browser through the HTTP transport of http.go, and both
// get the same Events (a reply's text arrives in batches of about 30 ms).
// The API server (app/server) gets the same engine through Models.
package service

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/hotkey"
	"github.com/suzuran-app/suzuran/app/hub"
	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/app/settings"
	"github.com/suzuran-app/suzuran/app/store"
	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
	"github.com/suzuran-app/suzuran/engine/prefixstore"
)

// Options configure a Service.
type Options struct {
	// DatabasePath is the conversation database; "" is store.DefaultPath.
	DatabasePath string
	// SettingsPath is settings.json; "" is settings.Path().
	SettingsPath string
	// Model is the model folder to run; "" is the settings' "model", else
	// the demo model Suzuran Tiny (installed from the binary).
	Model string
	// Backend, Threads and Precision choose how the engine runs ("cpu",
	// 0: all cores, "": the checkpoint's own).
	Backend   string
	Threads   int
	Precision string
	// ContextTokens, when above 0, overrides the settings' context length
	// (`suzuran serve --ctx`); QueueSize bounds the requests waiting behind
	// the running ones (0: the engine's default).
	ContextTokens int
	QueueSize     int
	// Parallel, when above 0, overrides the settings' parallel requests
	// (`suzuran serve --parallel`).
	Parallel int
	// Version is the app's version, shown by the window.
	Version string
	// Pace is a pause after each generated token: with it the small demo
	// and test models stream at the speed of the full model on a Mac
	// (10 ms is about 100 tokens a second), for working on the window and
	// for tests that act while a reply is still being written. 0 in use.
	Pace time.Duration
	// API switches the local API server on and off; nil leaves the switch
	// unavailable (the UI then hides it).
	API APISwitch
	// Shortcut takes the global shortcut that opens the window (its
	// canonical name, "" for none) in place of the one before, or says why
	// the system refused it; nil where there are none (Linux, a browser):
	// the settings view then says the shortcut is macOS's.
	Shortcut func(shortcut string) error
	Log      zerolog.Logger
	// GPUCheck configures the first-run GPU self-check of a GPU backend
	// (engine/gpucheck). Its Version is Options.Version; StateFile ""
	// means gpu-check.json beside settings.json; DemoDir "" means the demo
	// model, installed from the binary beside the other models.
	GPUCheck gpucheck.Options
	// Report writes the report of `suzuran doctor --json`, which the
	// window's "Copy report" copies; nil: the window offers none.
	Report func() (string, error)
	// PrefixDir is the folder of prefix snapshots on disk; "" is
	// prefixstore.DefaultDir (under the user cache folder).
	PrefixDir string
}

// APISwitch starts and stops the local API server. The app's main package
// implements it with app/server, giving the server this Service's Models.
type APISwitch interface {
	// Start listens with the settings' port, exposure, key and origins and
	// returns the address it listens on.
	Start(s Settings) (addr string, err error)
	Stop(ctx context.Context) error
}

// APIState is the local API's state as the window and the tray show it.
type APIState struct {
	Available bool   `json:"available"`
	Enabled   bool   `json:"enabled"`
	URL       string `json:"url"` // http://127.0.0.1:8080 while enabled
	LAN       bool   `json:"lan"`
	Error     string `json:"error"`
}

// Service is the app's state behind every window. Create it with Open.
type Service struct {
	log      zerolog.Logger
	store    *store.Store
	settings settingsFile
	version  string
	models   *modelhost.Host
	events   bus
	api      APISwitch
	hub      *downloader // the first run's download (welcome.go)
	attach   attachments

	mu       sync.Mutex
	current  Settings
	apiState APIState
	running  map[int64]*generation   // by conversation
	live     map[int64]store.Message // replies being written, by id
	wg       sync.WaitGroup
	download DownloadState
	watching *hub.Job // the download whose progress is being followed
	shortcut func(string) error
	// shortcutError is why the saved shortcut could not be taken at start.
	shortcutError string
	// welcomeSeen is true once the welcome view was dismissed (welcome.go).
	welcomeSeen bool
	// pickFolder is the desktop's folder dialog; nil in a browser.
	pickFolder func(title string) (string, error)
	// pickSave is the desktop's save dialog; nil in a browser.
	pickSave func(name string) (string, error)

	pace time.Duration
	// report is Options.Report.
	report func() (string, error)
	// prefix keeps the engine's prefix snapshots on disk; nil when its
	// folder could not be opened (the engine then keeps them in memory).
	prefix *prefixstore.Store
}

// defaultPrefixDir is where Options.PrefixDir "" puts the prefix
// snapshots (the package's tests point it at a folder of their own).
var defaultPrefixDir = prefixstore.DefaultDir

// GPUCheckFile is the file, beside settings.json, that remembers the GPU
// self-check's result (engine/gpucheck).
const GPUCheckFile = "gpu-check.json"

// Open opens the database and the settings and starts loading the model in
// the background; the model's progress arrives as EventModel.
func Open(o Options) (*Service, error) {
	if o.SettingsPath == "" {
		p, err := settings.Path()
		if err != nil {
			return nil, err
		}
		o.SettingsPath = p
	}
	if o.DatabasePath == "" {
		p, err := store.DefaultPath()
		if err != nil {
			return nil, err
		}
		o.DatabasePath = p
	}
	if o.Backend == "" {
		o.Backend = "cpu"
	}
	s := &Service{
		log:      o.Log,
		settings: settingsFile{path: o.SettingsPath},
		version:  o.Version,
		api:      o.API,
		shortcut: o.Shortcut,
		pace:     o.Pace,
		running:  map[int64]*generation{},
		live:     map[int64]store.Message{},
		hub:      newDownloader(),
		download: DownloadState{State: DownloadIdle, SecondsLeft: -1},
	}
	current, configured, err := s.settings.load()
	if err != nil {
		// Bad settings must not keep the app from starting: run on the
		// defaults and say why; saving rewrites only the app's keys.
		s.log.Warn().Err(err).Msg("settings unreadable; using the defaults")
	}
	s.current = current
	s.welcomeSeen = s.settings.flag(welcomeSeenKey)
	s.apiState = APIState{Available: o.API != nil, LAN: current.APILAN}

	dir, err := modelFolder(o.Model, configured)
	if err != nil {
		return nil, err
	}

	db, err := store.Open(o.DatabasePath)
	if err != nil {
		return nil, err
	}
	if why := db.ReadOnly(); why != "" {
		s.log.Warn().Str("database", o.DatabasePath).Msg("conversations are read-only: " + why)
	}
	s.store = db
	check := gpuCheckOptions(o, dir)
	s.report = o.Report
	prefix := s.openPrefixStore(o.PrefixDir, current.PrefixCacheGB)
	s.prefix = prefix
	s.models = modelhost.New(modelhost.Options{
		Load: engine.LoadOptions{Backend: o.Backend, Threads: o.Threads, QueueSize: o.QueueSize, Precision: o.Precision, Store: prefix},
		GPU:  check,
		ContextTokens: func() int {
			if o.ContextTokens > 0 {
				return o.ContextTokens
			}
			return s.Settings().ContextTokens
		},
		Parallel: func() int {
			if o.Parallel > 0 {
				return o.Parallel
			}
			return s.Settings().Parallel
		},
		KeepAlive: func() time.Duration { return time.Duration(s.Settings().KeepAliveMinutes) * time.Minute },
		OnChange:  func(m modelhost.ModelState) { s.events.publish(Event{Type: EventModel, Model: &m}) },
	})
	s.models.Load(dir)
	return s, nil
}

// modelFolder is the model to load: the one asked for, else the one the
// settings name, else the demo model, installed if it is not yet.
func modelFolder(asked, configured string) (string, error) {
	dir := asked
	if dir == "" {
		dir = configured
	}
	if dir != "" {
		return dir, nil
	}
	root, err := models.DefaultRoot()
	if err != nil {
		return "", err
	}
	if dir, err = models.Install(root); err != nil {
		return "", fmt.Errorf("installing the demo model: %w", err)
	}
	return dir, nil
}

// gpuCheckOptions completes o.GPUCheck for the model in dir.
func gpuCheckOptions(o Options, dir string) gpucheck.Options {
	check := o.GPUCheck
	check.Version = o.Version
	if check.StateFile == "" {
		check.StateFile = filepath.Join(filepath.Dir(o.SettingsPath), GPUCheckFile)
	}
	if check.DemoDir == "" && o.Backend != "cpu" {
		if modelhost.IsDemo(dir) {
			check.DemoDir = dir
		} else if root, err := models.DefaultRoot(); err == nil {
			// A demo model that cannot be installed leaves the check to
			// the loaded model's layers.
			check.DemoDir, _ = models.Install(root)
		}
	}
	return check
}

// openPrefixStore opens the prefix snapshots' store in dir (default: the
// app's), of limitGB; nil, with a warning, if it cannot be opened, and the
// snapshots stay in memory.
func (s *Service) openPrefixStore(dir string, limitGB int) *prefixstore.Store {
	var err error
	if dir == "" {
		dir, err = defaultPrefixDir()
	}
	var prefix *prefixstore.Store
	if err == nil {
		prefix, err = prefixstore.Open(prefixstore.Options{Dir: dir, Limit: int64(limitGB) << 30,
			Log: func(msg string) { s.log.Warn().Msg(msg) }})
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("prefix snapshots are kept in memory only")
	}
	return prefix
}

// Close stops every reply (each is saved as stopped), the API server, and
// the engine, and closes the database.
func (s *Service) Close() error {
	s.mu.Lock()
	for _, g := range s.running {
		g.cancel()
	}
	s.mu.Unlock()
	if s.hub.downloads != nil {
		if job := s.hub.downloads.Current(); job != nil {
			job.Cancel() // a pause: the next start resumes
		}
	}
	s.attach.cancelAll()
	s.wg.Wait()
	if s.api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.api.Stop(ctx)
		cancel()
	}
	s.models.Close()
	if s.prefix != nil {
		s.prefix.Close()
	}
	return s.store.Close()
}

// UI is the set of calls the window makes.
func (s *Service) UI() *UI { return &UI{s: s} }

// Models is the engine as the API server takes it.
func (s *Service) Models() server.Models { return s.models }

// WaitModel waits for the model's load under way (if any) to end and
// returns its state, with the load's error when it failed.
func (s *Service) WaitModel(ctx context.Context) (modelhost.ModelState, error) {
	return s.models.Wait(ctx)
}

// Subscribe returns a channel of every event from now on, and the function
// that ends the subscription. The channel is closed when the subscriber
// falls too far behind (see bus).
func (s *Service) Subscribe() (<-chan Event, func()) { return s.events.subscribe() }

// Settings returns the current settings.
func (s *Service) Settings() Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Store is the conversation database (for tests and the smoke test's
// checks).
func (s *Service) Store() *store.Store { return s.store }

// ModelState returns the model's state.
func (s *Service) ModelState() modelhost.ModelState { return s.models.Status() }

// APIState returns the local API's state.
func (s *Service) APIState() APIState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apiState
}

// SetServedAPI says the API runs beside this service's UI in the same
// process (suzuran serve, at url): it is on while the process runs, with
// no switch, and its flags rather than the settings configure it.
func (s *Service) SetServedAPI(url string, lan bool) {
	s.mu.Lock()
	s.apiState = APIState{Available: false, Enabled: true, URL: url, LAN: lan}
	state := s.apiState
	s.mu.Unlock()
	s.events.publish(Event{Type: EventAPI, API: &state})
}

// SetAPIEnabled switches the local API on or off.
func (s *Service) SetAPIEnabled(on bool) (APIState, error) {
	if s.api == nil {
		return s.APIState(), errors.New("this build of Suzuran has no local API server")
	}
	s.mu.Lock()
	settings := s.current
	was := s.apiState.Enabled
	s.mu.Unlock()
	var state APIState
	var err error
	switch {
	case on && !was:
		var addr string
		addr, err = s.api.Start(settings)
		state = APIState{Available: true, Enabled: err == nil, LAN: settings.APILAN}
		if err == nil {
			state.URL = "http://" + addr
		} else {
			state.Error = err.Error()
		}
	case !on && was:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.api.Stop(ctx)
		cancel()
		state = APIState{Available: true, LAN: settings.APILAN}
		if err != nil {
			state.Error = err.Error()
		}
	default:
		return s.APIState(), nil
	}
	s.mu.Lock()
	s.apiState = state
	s.mu.Unlock()
	s.events.publish(Event{Type: EventAPI, API: &state})
	return state, err
}

// SaveSettings validates and stores new settings, applying what changed:
// the API restarts with its new port or exposure, a new context length
// reloads the model, launch at login is registered or removed.
func (s *Service) SaveSettings(next Settings) (Settings, error) {
	next.APICORSOrigins = normaliseOrigins(next.APICORSOrigins)
	if next.APILAN && next.APIKey == "" {
		next.APIKey = newAPIKey()
	}
	if err := next.Validate(); err != nil {
		return s.Settings(), err
	}
	next.GlobalShortcut = canonicalShortcut(next.GlobalShortcut)
	s.mu.Lock()
	prev := s.current
	s.mu.Unlock()
	if s.shortcut != nil && next.GlobalShortcut != prev.GlobalShortcut {
		// Taken first: a combination the system refuses is not saved.
		if err := s.shortcut(canonicalShortcut(next.GlobalShortcut)); err != nil {
			return prev, err
		}
	}
	if next.LaunchAtLogin != prev.LaunchAtLogin {
		if err := setLaunchAtLogin(next.LaunchAtLogin); err != nil {
			s.restoreShortcut(prev, next)
			return prev, err
		}
	}
	if err := s.settings.save(next); err != nil {
		s.restoreShortcut(prev, next)
		return prev, err
	}
	s.mu.Lock()
	s.current = next
	apiOn := s.apiState.Enabled
	s.mu.Unlock()
	s.events.publish(Event{Type: EventSettings, Settings: &next})

	// Under suzuran serve the API is the server's own, configured by its
	// command line (s.api is nil): nothing restarts, the values are saved.
	if apiOn && s.api != nil && (prev.APIPort != next.APIPort || prev.APILAN != next.APILAN || prev.APIKey != next.APIKey ||
		fmt.Sprint(prev.APICORSOrigins) != fmt.Sprint(next.APICORSOrigins)) {
		s.SetAPIEnabled(false)
		if _, err := s.SetAPIEnabled(true); err != nil {
			return next, fmt.Errorf("settings saved, but the API did not restart: %w", err)
		}
	}
	if prev.ContextTokens != next.ContextTokens {
		s.models.Load(s.models.Status().Dir)
	}
	if prev.PrefixCacheGB != next.PrefixCacheGB && s.prefix != nil {
		s.prefix.SetLimit(int64(next.PrefixCacheGB) << 30)
	}
	if s.shortcut != nil && prev.GlobalShortcut != next.GlobalShortcut {
		s.mu.Lock()
		s.shortcutError = ""
		s.mu.Unlock()
	}
	if prev.KeepAliveMinutes != next.KeepAliveMinutes {
		s.models.ResetIdle()
	}
	return next, nil
}

// ApplyShortcut takes the saved global shortcut; the desktop calls it once
// its window is up. Why it failed shows in the settings view
// (AppState.Shortcut) until another shortcut is saved.
func (s *Service) ApplyShortcut() error {
	if s.shortcut == nil {
		return nil
	}
	err := s.shortcut(canonicalShortcut(s.Settings().GlobalShortcut))
	s.mu.Lock()
	s.shortcutError = ""
	if err != nil {
		s.shortcutError = err.Error()
	}
	s.mu.Unlock()
	return err
}

// restoreShortcut takes the previous shortcut back after a save that failed
// past taking the new one.
func (s *Service) restoreShortcut(prev, next Settings) {
	if s.shortcut != nil && next.GlobalShortcut != prev.GlobalShortcut {
		if err := s.shortcut(canonicalShortcut(prev.GlobalShortcut)); err != nil {
			s.log.Warn().Err(err).Msg("taking the previous global shortcut back")
		}
	}
}

// canonicalShortcut is a valid shortcut's canonical name ("" stays "").
func canonicalShortcut(text string) string {
	if sc, err := hotkey.Parse(text); err == nil {
		return sc.String()
	}
	return ""
}

// ShortcutState says whether this app has a global shortcut and why the
// saved one could not be taken.
type ShortcutState struct {
	Available bool   `json:"available"`
	Error     string `json:"error"`
}

func (s *Service) shortcutState() ShortcutState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ShortcutState{Available: s.shortcut != nil, Error: s.shortcutError}
}

// RecheckGPU loads the model again with the GPU self-check run anew.
func (s *Service) RecheckGPU() error {
	s.models.RecheckGPU()
	return nil
}

// Report is the report of `suzuran doctor --json` (Options.Report).
func (s *Service) Report() (string, error) {
	if s.report == nil {
		return "", errors.New("no report in this build: run `suzuran doctor --json` in a terminal")
	}
	return s.report()
}

// LoadModel switches to the model in dir (or reloads the current one when
// dir is "") and makes it the configured model.
func (s *Service) LoadModel(dir string) error {
	if dir == "" {
		dir = s.models.Status().Dir
	} else if !modelhost.IsDemo(dir) {
		if err := settings.SetModel(s.settings.path, dir); err != nil {
			return err
		}
	}
	s.models.Load(dir)
	return nil
}
