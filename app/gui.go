package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"
	"github.com/wailsapp/wails/v2"
	wailslogger "github.com/wailsapp/wails/v2/pkg/logger"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
	"github.com/wailsapp/wails/v2/pkg/options/mac"
	wailsruntime "github.com/wailsapp/wails/v2/pkg/runtime"

	"github.com/suzuran-app/suzuran/app/service"
	"github.com/suzuran-app/suzuran/app/update"
	"github.com/suzuran-app/suzuran/assets"
	"github.com/suzuran-app/suzuran/frontend"
)

// windowTitle is the main window's title: the app's name alone, as macOS
// windows are titled; the version is in the About box (aboutBox) and the
// window's header.
const windowTitle = "Suzuran"

// aboutBox is the macOS About panel: the name and the version the binary
// was built as.
func aboutBox() *mac.AboutInfo {
	return &mac.AboutInfo{Title: windowTitle, Message: "Version " + version, Icon: assets.AppIcon}
}

// windowEvent is the Wails event that carries the service's events to
// the window (frontend/src/lib/backend.ts listens for it).
const windowEvent = "suzuran:event"

// windowCommand is an event the tray sends the window: "new-chat" or
// "settings".
type windowCommand struct {
	Type    string `json:"type"` // always "command"
	Command string `json:"command"`
}

// desktop ties the window and the tray together. Tray clicks arrive on
// the tray's goroutine while Wails calls startup on its own, hence the lock
// around the Wails context.
type desktop struct {
	log  zerolog.Logger
	tray *tray
	svc  *service.Service

	// trayNotice is set when the desktop shows no tray icons: the window
	// says so once (trayNoticeShown remembers it across launches).
	trayNotice bool

	mu  sync.Mutex
	ctx context.Context // Wails' context, set by startup; nil before it
}

// runGUI starts the desktop app and returns when it quits.
func runGUI() error {
	if err := checkDisplay(); err != nil {
		return err
	}
	dist, err := frontend.Dist()
	if err != nil {
		return err
	}
	d := &desktop{log: log.Logger.With().Str("part", "desktop").Logger()}
	first, release, err := claimInstance(d.showWindow)
	if err != nil {
		d.log.Warn().Err(err).Msg("single instance check")
	}
	if !first {
		d.log.Info().Msg("Suzuran is already running: showed its window")
		return nil
	}
	defer release()
	d.log.Info().Str("version", version).Msg("starting")
	api := &localAPI{log: log.Logger.With().Str("part", "api").Logger()}
	d.svc, err = service.Open(service.Options{
		Backend:  defaultBackend(),
		Version:  version,
		API:      api,
		Shortcut: newGlobalShortcut(d.showWindow),
		Log:      log.Logger.With().Str("part", "service").Logger(),
		Report:   doctorJSON,
	})
	if err != nil {
		return err
	}
	defer d.svc.Close()
	api.models, api.ui = d.svc.Models(), service.Handler(d.svc, dist)
	d.tray = newTray(trayActions{
		open:        d.showWindow,
		newChat:     func() { d.command("new-chat") },
		settings:    func() { d.command("settings") },
		setAPI:      func(on bool) { d.svc.SetAPIEnabled(on) },
		copyURL:     d.copyText,
		copyReport:  func() { go d.copyReport() },
		checkUpdate: func() { go d.checkForUpdates() },
		openURL:     d.openURL,
		quit:        d.quit,
	}, d.log)
	d.tray.showModel(d.svc.ModelState())
	d.tray.showAPI(d.svc.APIState())
	// Without a tray host (GNOME without the AppIndicator extension) the
	// icon appears nowhere: the window is then the only way in, so closing
	// it quits, and it says so once.
	noTrayHost, err := trayHostMissing()
	if err != nil {
		d.log.Warn().Err(err).Msg("could not ask the session bus for a tray host")
	}
	if noTrayHost {
		d.log.Warn().Msg("no StatusNotifier host on this desktop: the tray icon is not shown; the window stays the way in")
		d.trayNotice = true
	}

	err = wails.Run(&options.App{
		Title:     windowTitle,
		Width:     880,
		Height:    680,
		MinWidth:  420,
		MinHeight: 360,
		// Closing the window leaves the app in the menu bar; Quit in the
		// tray menu ends it.
		HideWindowOnClose: !noTrayHost,
		AssetServer:       &assetserver.Options{Assets: dist},
		// Documents are dropped on the window to be put into the prompt.
		DragAndDrop: &options.DragAndDrop{EnableFileDrop: true},
		OnStartup:   d.startup,
		OnDomReady:  d.domReady,
		OnShutdown:  d.shutdown,
		// The window calls the service's UI methods (window.go.service.UI).
		Bind: []any{d.svc.UI()},
		// A second launch shows the first one's window and exits.
		SingleInstanceLock: &options.SingleInstanceLock{
			UniqueId:               "app.suzuran.Suzuran",
			OnSecondInstanceLaunch: func(options.SecondInstanceData) { d.showWindow() },
		},
		Logger: wailsLog{log.Logger.With().Str("part", "wails").Logger()},
		// Wails filters by its own level first; zerolog's level decides.
		LogLevel:           wailslogger.TRACE,
		LogLevelProduction: wailslogger.TRACE,
		// On macOS the first showWindow shows it (see startHidden).
		StartHidden: startHidden,
		Mac: &mac.Options{
			About: aboutBox(),
		},
		Linux: &linux.Options{ProgramName: "suzuran", Icon: assets.AppIcon},
	})
	if err != nil {
		return err
	}
	d.log.Info().Msg("quit")
	return nil
}

func (d *desktop) startup(ctx context.Context) {
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	wailsruntime.OnFileDrop(ctx, d.filesDropped)
	d.svc.SetFilePicker(d.chooseFiles)
	d.tray.start()
	events, _ := d.svc.Subscribe()
	// The model may have loaded before the subscription: start from now.
	d.tray.showModel(d.svc.ModelState())
	d.tray.showAPI(d.svc.APIState())
	d.svc.SetFolderPicker(func(title string) (string, error) {
		return wailsruntime.OpenDirectoryDialog(ctx, wailsruntime.OpenDialogOptions{Title: title})
	})
	d.svc.SetSavePicker(func(name string) (string, error) {
		return wailsruntime.SaveFileDialog(ctx, wailsruntime.SaveDialogOptions{Title: "Export the conversation", DefaultFilename: name})
	})
	go d.forward(ctx, events)
	go func() {
		// On macOS the window opens near the menu bar, and the global
		// shortcut (⌥Space unless changed) opens it from any app.
		if startHidden {
			d.showWindow()
		}
		if err := d.svc.ApplyShortcut(); err != nil {
			d.log.Warn().Err(err).Msg("global shortcut")
		}
	}()
	// The daily update check reads the switch before each check, so
	// turning it off in Settings takes effect without a restart; a newer
	// release becomes a tray item, never a dialog out of nowhere.
	go update.Checker{Current: version, OnError: func(err error) {
		d.log.Info().Err(err).Msg("daily update check")
	}}.Daily(ctx, func() bool { return d.svc.Settings().CheckForUpdates }, d.tray.showUpdate)
}

// copyReport is the tray's "Copy Report": the report of `suzuran doctor
// --json` on the clipboard (it takes seconds).
func (d *desktop) copyReport() {
	report, err := d.svc.Report()
	if err != nil {
		d.log.Warn().Err(err).Msg("the doctor's report")
		return
	}
	d.copyText(report)
}

// checkForUpdates is the tray's "Check for Updates…": it reads the releases
// feed now and says what it found in a dialog, offering the download when
// there is a newer version. Nothing is downloaded or installed here.
func (d *desktop) checkForUpdates() {
	ctx := d.context()
	if ctx == nil {
		return
	}
	r, err := update.Checker{Current: version}.Check(ctx)
	if err != nil {
		d.log.Warn().Err(err).Msg("update check")
		wailsruntime.MessageDialog(ctx, wailsruntime.MessageDialogOptions{
			Type: wailsruntime.WarningDialog, Title: "Check for Updates", Message: err.Error()})
		return
	}
	d.tray.showUpdate(r)
	if !r.Newer {
		wailsruntime.MessageDialog(ctx, wailsruntime.MessageDialogOptions{
			Type: wailsruntime.InfoDialog, Title: "Check for Updates", Message: r.Message()})
		return
	}
	answer, err := wailsruntime.MessageDialog(ctx, wailsruntime.MessageDialogOptions{
		Type:          wailsruntime.QuestionDialog,
		Title:         "Check for Updates",
		Message:       r.Message(),
		Buttons:       []string{"Download", "Later"},
		DefaultButton: "Download",
		CancelButton:  "Later",
	})
	if err == nil && answer == "Download" {
		d.openURL(r.DownloadURL)
	}
}

// openURL opens a page in the user's browser.
func (d *desktop) openURL(url string) {
	if ctx := d.context(); ctx != nil && url != "" {
		wailsruntime.BrowserOpenURL(ctx, url)
	}
}

// forward hands the service's events to the window and the tray until the
// app ends. A window that fell behind (the channel closes) reloads what it
// shows on the "resync" that follows a new subscription.
func (d *desktop) forward(ctx context.Context, events <-chan service.Event) {
	for {
		for ev := range events {
			switch ev.Type {
			case service.EventModel:
				d.tray.showModel(*ev.Model)
			case service.EventAPI:
				d.tray.showAPI(*ev.API)
			case service.EventDownload:
				d.tray.showDownload(*ev.Download)
			}
			wailsruntime.EventsEmit(ctx, windowEvent, ev)
		}
		if ctx.Err() != nil {
			return
		}
		events, _ = d.svc.Subscribe()
		wailsruntime.EventsEmit(ctx, windowEvent, map[string]string{"type": "resync"})
	}
}

// command shows the window and tells it to open a view.
func (d *desktop) command(name string) {
	d.showWindow()
	if ctx := d.context(); ctx != nil {
		wailsruntime.EventsEmit(ctx, windowEvent, windowCommand{Type: "command", Command: name})
	}
}

func (d *desktop) copyText(text string) {
	if ctx := d.context(); ctx != nil && text != "" {
		if err := wailsruntime.ClipboardSetText(ctx, text); err != nil {
			d.log.Warn().Err(err).Msg("copying the API address")
		}
	}
}

func (d *desktop) shutdown(ctx context.Context) { d.tray.stop() }

// domReady runs when the page has loaded: the moment a dialog over the
// window can be seen.
func (d *desktop) domReady(ctx context.Context) {
	if !d.trayNotice {
		return
	}
	marker := filepath.Join(logDir(runtime.GOOS, os.Getenv, homeDir()), trayNoticeMarker)
	if _, err := os.Stat(marker); err == nil {
		d.log.Info().Msg("the no-tray-icon notice was shown before; not again")
		return
	}
	go func() {
		d.log.Info().Msg("showing the no-tray-icon notice")
		_, err := wailsruntime.MessageDialog(ctx, wailsruntime.MessageDialogOptions{
			Type:    wailsruntime.InfoDialog,
			Title:   trayNoticeTitle,
			Message: trayHostHelp,
		})
		if err != nil {
			d.log.Warn().Err(err).Msg("the no-tray-icon notice")
			return
		}
		err = os.MkdirAll(filepath.Dir(marker), 0o755)
		if err == nil {
			err = os.WriteFile(marker, nil, 0o644)
		}
		if err != nil {
			d.log.Warn().Err(err).Msg("remembering that the no-tray-icon notice was shown")
		}
	}()
}

// The notice's title (the desktop smoke test finds its dialog by it), and
// the file beside the log that records it was shown.
const (
	trayNoticeTitle  = "Menu-bar icon unavailable"
	trayNoticeMarker = "tray-notice-shown"
)

// homeDir is the user's home folder, "" when unknown.
func homeDir() string {
	home, _ := os.UserHomeDir()
	return home
}

func (d *desktop) context() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctx
}

// showWindow brings the chat window back, from the tray, the global
// shortcut or a second launch; on macOS it also first shows it at launch.
func (d *desktop) showWindow() {
	ctx := d.context()
	if ctx == nil {
		return
	}
	if showAppWindow() {
		return
	}
	wailsruntime.WindowUnminimise(ctx)
	wailsruntime.WindowShow(ctx)
}

func (d *desktop) quit() {
	d.log.Info().Msg("quit from the tray")
	if ctx := d.context(); ctx != nil {
		wailsruntime.Quit(ctx)
	}
}

// filesDropped attaches the files dropped on the window to the question
// being written; the window shows them from the service's events.
func (d *desktop) filesDropped(x, y int, paths []string) {
	d.log.Info().Strs("paths", paths).Int("x", x).Int("y", y).Msg("files dropped on the window")
	d.svc.AttachFiles(paths)
}

// chooseFiles is the paperclip's open-files dialog.
func (d *desktop) chooseFiles() ([]string, error) {
	ctx := d.context()
	if ctx == nil {
		return nil, errors.New("the window is not open yet")
	}
	return wailsruntime.OpenMultipleFilesDialog(ctx, wailsruntime.OpenDialogOptions{Title: "Attach documents"})
}

// wailsLog sends Wails' own messages to the app's log.
type wailsLog struct{ log zerolog.Logger }

func (w wailsLog) Print(message string)   { w.log.Info().Msg(message) }
func (w wailsLog) Trace(message string)   { w.log.Trace().Msg(message) }
func (w wailsLog) Debug(message string)   { w.log.Debug().Msg(message) }
func (w wailsLog) Info(message string)    { w.log.Info().Msg(message) }
func (w wailsLog) Warning(message string) { w.log.Warn().Msg(message) }
func (w wailsLog) Error(message string)   { w.log.Error().Msg(message) }
func (w wailsLog) Fatal(message string)   { w.log.Fatal().Msg(message) }
