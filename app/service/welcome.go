package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/suzuran-app/suzuran/app/hub"
	"github.com/suzuran-app/suzuran/app/internal/bytesize"
	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/settings"
	"github.com/suzuran-app/suzuran/assets/models"
)

// The first run: the welcome view asks what a download of the real model
// would take (Welcome), starts it (StartDownload), pauses it
// (PauseDownload; StartDownload resumes with HTTP Range), and follows it
// through EventDownload; the tray shows the same state. When it completes
// the model is checked, saved as the configured model and loaded. Models
// and UseModel are the settings' model picker.

// Download states.
const (
	DownloadIdle      = "idle"
	DownloadRunning   = "downloading"
	DownloadPaused    = "paused"
	DownloadVerifying = "verifying" // checking the finished model before loading it
	DownloadDone      = "done"
	DownloadFailed    = "error"
)

// planTimeout bounds Welcome's questions to the hub (the listing, with its
// retries), so that the view says what went wrong instead of waiting.
const planTimeout = 30 * time.Second

// DownloadState is the download as the welcome view and the tray show it.
type DownloadState struct {
	State string `json:"state"` // idle, downloading, paused, verifying, done or error
	Repo  string `json:"repo"`
	// Done and Total are bytes (Done counts what was already on disk).
	Done       int64   `json:"done"`
	Total      int64   `json:"total"`
	Fraction   float64 `json:"fraction"` // 0..1
	FilesDone  int     `json:"filesDone"`
	FilesTotal int     `json:"filesTotal"`
	// BytesPerSecond is the recent speed; SecondsLeft -1 when unknown.
	BytesPerSecond float64 `json:"bytesPerSecond"`
	SecondsLeft    int64   `json:"secondsLeft"`
	// Line is one sentence for the tray ("Downloading …: 45% (…), 12 min left").
	Line string `json:"line"`
	// Error says what failed and what to do; ErrorKind names the kind for
	// the window (auth, notFound, diskFull, architecture, network, server,
	// checksum, offline, invalid or other).
	Error     string `json:"error"`
	ErrorKind string `json:"errorKind"`
	// Dir is the downloaded model's folder, once done.
	Dir string `json:"dir"`
}

// MachineFinding is one result of the machine check, in plain words.
type MachineFinding struct {
	Check   string `json:"check"` // processor, macos, memory, gpu or disk
	Level   string `json:"level"` // ok, warning or refused
	Message string `json:"message"`
}

// WelcomeInfo is what the welcome view explains before a download.
type WelcomeInfo struct {
	Repo string `json:"repo"`
	// Size is the model's size; ToDownload what is not on disk yet, in
	// bytes; the *Text fields the same for people ("20.4 GB").
	Size           int64  `json:"size"`
	ToDownload     int64  `json:"toDownload"`
	SizeText       string `json:"sizeText"`
	ToDownloadText string `json:"toDownloadText"`
	FreeDisk       int64  `json:"freeDisk"`
	FreeDiskText   string `json:"freeDiskText"`
	// Dir is the folder the model goes to (the Hugging Face cache, shared
	// with other apps that use it).
	Dir string `json:"dir"`
	// Cached is true when the whole model is on disk already.
	Cached   bool             `json:"cached"`
	CanRun   bool             `json:"canRun"`
	Findings []MachineFinding `json:"findings"`
	// Error is why the plan could not be made (the hub out of reach, a
	// token needed, …); ErrorKind as in DownloadState.
	Error     string `json:"error"`
	ErrorKind string `json:"errorKind"`
	// Estimated is true when the hub could not be asked and Findings judge
	// the model's usual size (SizeText) instead of its listing.
	Estimated bool          `json:"estimated"`
	Download  DownloadState `json:"download"`
}

// ModelChoice is a model the settings' picker offers.
type ModelChoice struct {
	Name    string `json:"name"`
	Dir     string `json:"dir"`
	Source  string `json:"source"` // demo, Hugging Face cache, LM Studio or folder
	Size    int64  `json:"size"`
	Demo    bool   `json:"demo"`
	Current bool   `json:"current"`
	Valid   bool   `json:"valid"`
	// Problem names the file at fault and what to do when it is not valid.
	Problem string `json:"problem"`
	// Removable says RemoveModel may delete it; Frees is the disk space
	// that gives back.
	Removable bool  `json:"removable"`
	Frees     int64 `json:"frees"`
}

// downloader is the service's side of hub.Downloads.
type downloader struct {
	client    *hub.Client
	cfg       hub.Config
	cfgErr    error
	downloads *hub.Downloads
}

func newDownloader() *downloader {
	cfg, err := hub.ConfigFromEnv()
	d := &downloader{cfg: cfg, cfgErr: err}
	if err == nil {
		d.client = hub.NewClient(cfg)
		d.downloads = &hub.Downloads{Client: d.client}
	}
	return d
}

// errorKind names an error's kind for the window.
func errorKind(err error) string {
	kinds := []struct {
		kind error
		name string
	}{
		{hub.ErrAuth, "auth"}, {hub.ErrNotFound, "notFound"}, {hub.ErrDiskFull, "diskFull"},
		{hub.ErrArchitecture, "architecture"}, {hub.ErrNetwork, "network"}, {hub.ErrServer, "server"},
		{hub.ErrChecksum, "checksum"}, {hub.ErrOffline, "offline"},
	}
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			return k.name
		}
	}
	return "other"
}

func findings(r hub.Report) []MachineFinding {
	out := make([]MachineFinding, 0, len(r.Findings))
	for _, f := range r.Findings {
		out = append(out, MachineFinding{Check: f.Check, Level: f.Level.String(), Message: f.Message})
	}
	return out
}

// Welcome says what downloading repo ("" is Qwen3.6-35B-A3B in 4 bits)
// would take and whether this computer can run it.
func (u *UI) Welcome(repo string) WelcomeInfo {
	s := u.s
	if repo == "" {
		repo = hub.DefaultRepo
	}
	info := WelcomeInfo{Repo: repo, Download: s.Download()}
	if s.hub.cfgErr != nil {
		info.Error, info.ErrorKind = s.hub.cfgErr.Error(), "other"
		return info
	}
	ctx, cancel := context.WithTimeout(context.Background(), planTimeout)
	defer cancel()
	plan, err := s.hub.client.Plan(ctx, repo, "")
	if err != nil {
		info.Error, info.ErrorKind = err.Error(), errorKind(err)
		// The machine check needs no network: for the default model it is
		// made against the model's usual size, so that an offline first
		// run still says whether this computer can run it.
		if repo == hub.DefaultRepo && (info.ErrorKind == "network" || info.ErrorKind == "offline" || info.ErrorKind == "server") {
			report := s.hub.client.CheckMachineFor(hub.DefaultRepoBytes)
			info.CanRun, info.Findings, info.Estimated = report.CanRun(), findings(report), true
			info.Dir, info.SizeText = s.hub.client.CacheDir, bytesize.Format(hub.DefaultRepoBytes)
		}
		return info
	}
	info.Size, info.ToDownload, info.Dir, info.Cached = plan.Size, plan.ToDownload, plan.Dir, plan.Cached
	info.SizeText, info.ToDownloadText = bytesize.Format(plan.Size), bytesize.Format(plan.ToDownload)
	info.FreeDisk, info.FreeDiskText = plan.Machine.Machine.FreeDisk, bytesize.Format(plan.Machine.Machine.FreeDisk)
	info.CanRun, info.Findings = plan.Machine.CanRun(), findings(plan.Machine)
	return info
}

// welcomeSeenKey is the settings.json key that records that the welcome
// view was dismissed once. It is not part of Settings: the settings view
// saves those as a whole and would write back a stale value.
const welcomeSeenKey = "welcome_seen"

// showWelcome reports whether the window should open the welcome view by
// itself: the model is the demo (nothing downloaded or chosen yet) and the
// view was never dismissed.
func (s *Service) showWelcome() bool {
	s.mu.Lock()
	seen := s.welcomeSeen
	s.mu.Unlock()
	return !seen && s.ModelState().Demo
}

// DismissWelcome records that the user left the welcome view, so that it no
// longer opens by itself (the demo banner's button still opens it).
func (u *UI) DismissWelcome() error {
	s := u.s
	s.mu.Lock()
	seen := s.welcomeSeen
	s.welcomeSeen = true
	s.mu.Unlock()
	if seen {
		return nil
	}
	if err := settings.Update(s.settings.path, map[string]json.RawMessage{welcomeSeenKey: json.RawMessage("true")}); err != nil {
		return fmt.Errorf("remembering that the welcome view was seen: %w", err)
	}
	return nil
}

// Download returns the download's state.
func (s *Service) Download() DownloadState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.download
}

func (s *Service) setDownload(d DownloadState) {
	s.mu.Lock()
	s.download = d
	s.mu.Unlock()
	s.events.publish(Event{Type: EventDownload, Download: &d})
}

// StartDownload starts downloading repo ("" is the default model) in the
// background, or resumes a paused download where it stopped. Its progress
// arrives as EventDownload; when it completes the model is checked, saved
// as the configured model and loaded, and the demo stays in the picker.
func (u *UI) StartDownload(repo string) (DownloadState, error) {
	s := u.s
	if s.hub.cfgErr != nil {
		return s.Download(), s.hub.cfgErr
	}
	if repo == "" {
		repo = hub.DefaultRepo
	}
	job, err := s.hub.downloads.Start(repo, "")
	if err != nil {
		return s.Download(), err
	}
	s.mu.Lock()
	watching := s.watching == job
	s.watching = job
	s.mu.Unlock()
	if !watching {
		s.setDownload(DownloadState{State: DownloadRunning, Repo: repo, SecondsLeft: -1, Line: "Downloading " + repo + "…"})
		s.wg.Add(1)
		go s.follow(job)
	}
	return s.Download(), nil
}

// PauseDownload pauses the download; the part already downloaded stays,
// and StartDownload goes on from there.
func (u *UI) PauseDownload() DownloadState {
	s := u.s
	if s.hub.downloads != nil {
		if job := s.hub.downloads.Current(); job != nil {
			job.Cancel()
			<-job.Done()
		}
	}
	// follow records the pause; wait for it so the answer shows it.
	for range 100 {
		if d := s.Download(); d.State != DownloadRunning {
			return d
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s.Download()
}

// Download returns the download's state (idle before any).
func (u *UI) Download() DownloadState { return u.s.Download() }

// follow reports a job's progress until it ends, then switches to the
// downloaded model.
func (s *Service) follow(job *hub.Job) {
	defer s.wg.Done()
	reports, stop := job.Watch()
	defer stop()
	lastLine := ""
	for p := range reports {
		d := progressState(job.Repo, p)
		if d.Line == lastLine && !p.Finished {
			continue
		}
		lastLine = d.Line
		s.setDownload(d)
	}
	last := progressState(job.Repo, job.Progress())
	snap, err := job.Wait()
	switch {
	case errors.Is(err, context.Canceled):
		last.State = DownloadPaused
		last.Line = fmt.Sprintf("Download paused at %d%%: %s", int(100*last.Fraction), job.Repo)
		last.BytesPerSecond, last.SecondsLeft = 0, -1
		s.setDownload(last)
		return
	case err != nil:
		last.State, last.Error, last.ErrorKind = DownloadFailed, err.Error(), errorKind(err)
		last.Line = "Download failed: " + job.Repo
		s.setDownload(last)
		return
	}
	last.State, last.Fraction, last.Dir = DownloadVerifying, 1, snap.Dir
	last.Line = "Checking " + job.Repo + "…"
	s.setDownload(last)
	if f := hub.Inspect(snap.Dir); f.Err != nil {
		last.State, last.ErrorKind = DownloadFailed, "invalid"
		last.Error = fmt.Sprintf("The downloaded model cannot be used: %v", f.Err)
		last.Line = "Download failed: " + job.Repo
		s.setDownload(last)
		return
	}
	if err := s.LoadModel(snap.Dir); err != nil {
		last.State, last.Error, last.ErrorKind = DownloadFailed, "The model was downloaded but could not be saved as the one to use: "+err.Error(), "other"
		s.setDownload(last)
		return
	}
	last.State, last.Line = DownloadDone, fmt.Sprintf("Downloaded %s (%s)", job.Repo, bytesize.Format(last.Total))
	s.setDownload(last)
}

func progressState(repo string, p hub.Progress) DownloadState {
	d := DownloadState{State: DownloadRunning, Repo: repo, Done: p.Done, Total: p.Total, Fraction: p.Fraction(),
		FilesDone: p.FilesDone, FilesTotal: p.FilesTotal, BytesPerSecond: p.BytesPerSecond, SecondsLeft: -1, Line: p.String()}
	if p.Remaining >= 0 {
		d.SecondsLeft = int64(p.Remaining.Round(time.Second) / time.Second)
	}
	if p.Total == 0 { // before the listing: nothing known yet
		d.Fraction, d.Line = 0, "Downloading "+repo+"…"
	}
	return d
}

// Models lists the models to choose from: the demo model, and the models
// found in the Hugging Face cache and LM Studio's folders (those that
// cannot be used say why), and the current one if it is elsewhere.
func (u *UI) Models() ([]ModelChoice, error) {
	s := u.s
	current := s.ModelState().Dir
	out := []ModelChoice{{Name: models.DemoName, Source: "demo", Demo: true, Valid: true}}
	if root, err := models.DefaultRoot(); err == nil {
		out[0].Dir = filepath.Join(root, models.FolderName())
	}
	out[0].Current = modelhost.IsDemo(current)
	seen := false
	if s.hub.cfgErr == nil {
		found, err := hub.Discover(hub.DefaultPlaces(s.hub.cfg))
		if err != nil {
			return out, fmt.Errorf("looking for models: %w", err)
		}
		for _, f := range found {
			out = append(out, choice(f, current))
			seen = seen || sameDir(f.Dir, current)
		}
	}
	if !seen && current != "" && !modelhost.IsDemo(current) {
		out = append(out, choice(hub.Inspect(current), current))
	}
	return out, nil
}

func choice(f hub.Found, current string) ModelChoice {
	c := ModelChoice{Name: f.Name, Dir: f.Dir, Source: f.Source, Size: f.Size, Valid: f.Valid(), Current: sameDir(f.Dir, current)}
	if c.Name == "" {
		c.Name = filepath.Base(f.Dir)
	}
	if f.Err != nil {
		c.Problem = f.Err.Error()
	}
	if dir, err := removalDir(c); err == nil {
		c.Removable, c.Frees = true, diskBytes(dir)
	}
	return c
}

func sameDir(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ra, erra := filepath.EvalSymlinks(a)
	rb, errb := filepath.EvalSymlinks(b)
	if erra == nil && errb == nil {
		return ra == rb
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// UseModel checks the model in dir (a folder the user picked or typed, or
// one from Models; "" or the demo's folder is the demo model), saves it as
// the configured model and loads it. A folder the engine cannot load is
// refused with the file at fault and what to do; nothing changes then.
func (u *UI) UseModel(dir string) (ModelChoice, error) {
	s := u.s
	if dir == "" || modelhost.IsDemo(dir) {
		root, err := models.DefaultRoot()
		if err != nil {
			return ModelChoice{}, err
		}
		if dir, err = models.Install(root); err != nil {
			return ModelChoice{}, fmt.Errorf("installing the demo model: %w", err)
		}
		if err := settings.SetModel(s.settings.path, ""); err != nil {
			return ModelChoice{}, err
		}
		s.models.Load(dir)
		return ModelChoice{Name: models.DemoName, Dir: dir, Source: "demo", Demo: true, Valid: true, Current: true}, nil
	}
	f := hub.Inspect(dir)
	c := choice(f, f.Dir)
	if f.Err != nil {
		return c, fmt.Errorf("%s cannot be used: %w", f.Dir, f.Err)
	}
	return c, s.LoadModel(f.Dir)
}

// SetFolderPicker gives the service the desktop's folder dialog (Wails'
// OpenDirectoryDialog); a browser has none and types the path instead.
func (s *Service) SetFolderPicker(pick func(title string) (string, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pickFolder = pick
}

// CanPickFolder reports whether PickFolder opens a dialog (the desktop
// window); a browser shows a field for the path instead.
func (u *UI) CanPickFolder() bool {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	return u.s.pickFolder != nil
}

// PickFolder asks for a model folder with the system's dialog and returns
// it ("" when cancelled); use it with UseModel.
func (u *UI) PickFolder() (string, error) {
	u.s.mu.Lock()
	pick := u.s.pickFolder
	u.s.mu.Unlock()
	if pick == nil {
		return "", errors.New("no folder dialog here: type the model folder's path instead")
	}
	return pick("Choose a model folder (the one with config.json and the .safetensors files)")
}
