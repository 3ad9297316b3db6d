package main

import (
	"fmt"
	"sync"

	"fyne.io/systray"
	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/service"
	"github.com/suzuran-app/suzuran/app/update"
)

// Tray menu item titles; the desktop smoke test looks for these.
const (
	trayOpenTitle     = "Open Chat"
	trayNewChatTitle  = "New Chat"
	trayAPITitle      = "Local API"
	trayCopyURLTitle  = "Copy URL"
	traySettingsTitle = "Settings…"
	trayUpdateTitle   = "Check for Updates…"
	trayQuitTitle     = "Quit"
)

// trayActions is what the tray menu does.
// trayReportTitle copies `suzuran doctor --json` while the model runs on
// the CPU because the GPU failed.
const trayReportTitle = "Copy Report"

type trayActions struct {
	open        func()        // show the chat window
	newChat     func()        // show it with a new conversation
	settings    func()        // show it with the settings
	setAPI      func(on bool) // switch the local API
	copyURL     func(string)  // put the API's address on the clipboard
	copyReport  func()        // put `suzuran doctor --json` on the clipboard
	checkUpdate func()        // check the releases feed now and say what it found
	openURL     func(string)  // open a page in the user's browser
	quit        func()        // quit the app
}

// tray is the menu-bar icon (macOS) or StatusNotifierItem (Linux) and its
// menu. It runs inside the Wails app's event loop (systray's external-loop
// mode): start creates it once Wails is up, stop takes it down. Its model
// and API lines follow the service's events (showModel, showAPI).
type tray struct {
	log        zerolog.Logger
	actions    trayActions
	nativeUp   func()
	nativeDown func()
	stopOnce   sync.Once

	mu    sync.Mutex
	built bool
	model modelhost.ModelState
	api   service.APIState
	// newer is the release the daily check found, shown as a menu item
	// that opens its download; zero until one is found.
	newer update.Result
	dl    service.DownloadState
	items trayItems
}

type trayItems struct {
	model, fallback, report, download, api, address, copyURL, available *systray.MenuItem
}

func newTray(actions trayActions, log zerolog.Logger) *tray {
	t := &tray{log: log, actions: actions}
	t.nativeUp, t.nativeDown = systray.RunWithExternalLoop(t.ready, nil)
	return t
}

// start shows the tray; on macOS it must run on the main thread, which
// startTray (tray_darwin.go) arranges.
func (t *tray) start() { startTray(t.nativeUp) }

// stop removes the tray at shutdown.
func (t *tray) stop() { t.stopOnce.Do(func() { stopTray(t.nativeDown) }) }

// ready builds the icon and menu; systray calls it once the tray exists.
func (t *tray) ready() {
	setTrayIcon()
	systray.SetTooltip("Suzuran")
	open := systray.AddMenuItem(trayOpenTitle, "Show the chat window")
	newChat := systray.AddMenuItem(trayNewChatTitle, "Start a new conversation")
	systray.AddSeparator()
	model := systray.AddMenuItem("Model: starting…", "The model's state")
	model.Disable()
	fallback := systray.AddMenuItem("", "Why the model runs on the CPU")
	fallback.Disable()
	report := systray.AddMenuItem(trayReportTitle, "Copy the report of the GPU check, for a bug report")
	download := systray.AddMenuItem("", "The model's download; open the chat window to pause it")
	systray.AddSeparator()
	api := systray.AddMenuItemCheckbox(trayAPITitle, "Let other programs on this computer use the model through an OpenAI-compatible API", false)
	address := systray.AddMenuItem("", "The API's address")
	address.Disable()
	copyURL := systray.AddMenuItem(trayCopyURLTitle, "Copy the API's address")
	systray.AddSeparator()
	settings := systray.AddMenuItem(traySettingsTitle, "Open the settings")
	checkUpdate := systray.AddMenuItem(trayUpdateTitle, "See whether a newer Suzuran is out")
	available := systray.AddMenuItem("", "Open the new version's download page")
	systray.AddSeparator()
	quit := systray.AddMenuItem(trayQuitTitle, "Quit Suzuran")
	setTrayClick(t.actions.open)

	t.mu.Lock()
	t.items = trayItems{model: model, fallback: fallback, report: report, download: download, api: api, address: address, copyURL: copyURL, available: available}
	t.built = true
	t.refreshLocked()
	t.mu.Unlock()
	t.log.Debug().Msg("tray ready")

	go func() {
		for {
			select {
			case <-open.ClickedCh:
				t.actions.open()
			case <-download.ClickedCh:
				t.actions.open()
			case <-report.ClickedCh:
				t.actions.copyReport()
			case <-newChat.ClickedCh:
				t.actions.newChat()
			case <-api.ClickedCh:
				t.actions.setAPI(!api.Checked())
			case <-copyURL.ClickedCh:
				t.mu.Lock()
				url := t.api.URL
				t.mu.Unlock()
				t.actions.copyURL(url)
			case <-settings.ClickedCh:
				t.actions.settings()
			case <-checkUpdate.ClickedCh:
				t.actions.checkUpdate()
			case <-available.ClickedCh:
				t.mu.Lock()
				url := t.newer.DownloadURL
				t.mu.Unlock()
				t.actions.openURL(url)
			case <-quit.ClickedCh:
				t.actions.quit()
				return
			}
		}
	}()
}

// showModel, showUpdate, showDownload and showAPI update the menu with the
// service's state (showUpdate adds the "Suzuran X is available…" item for a
// newer release; showDownload shows the model download's line while there is
// one).
func (t *tray) showModel(m modelhost.ModelState)     { t.set(func() { t.model = m }) }
func (t *tray) showUpdate(r update.Result)           { t.set(func() { t.newer = r }) }
func (t *tray) showDownload(d service.DownloadState) { t.set(func() { t.dl = d }) }
func (t *tray) showAPI(a service.APIState)           { t.set(func() { t.api = a }) }

// set changes the tray's state under its lock and redraws the menu.
func (t *tray) set(change func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	change()
	t.refreshLocked()
}

func (t *tray) refreshLocked() {
	if !t.built {
		return
	}
	t.items.model.SetTitle(modelLine(t.model))
	if t.model.Fallback != "" {
		t.items.fallback.SetTitle(t.model.Fallback)
		t.items.fallback.Show()
		t.items.report.Show()
	} else {
		t.items.fallback.Hide()
		t.items.report.Hide()
	}
	if line := downloadLine(t.dl); line != "" {
		t.items.download.SetTitle(line)
		t.items.download.Show()
	} else {
		t.items.download.Hide()
	}
	if t.api.Enabled {
		t.items.api.Check()
		t.items.address.SetTitle(t.api.URL)
		t.items.address.Show()
		t.items.copyURL.Show()
	} else {
		t.items.api.Uncheck()
		t.items.address.Hide()
		t.items.copyURL.Hide()
	}
	if t.newer.Newer {
		t.items.available.SetTitle(fmt.Sprintf("Suzuran %s is available…", t.newer.Latest))
		t.items.available.Show()
	} else {
		t.items.available.Hide()
	}
	if t.api.Error != "" && !t.api.Enabled {
		t.items.address.SetTitle("API: " + t.api.Error)
		t.items.address.Show()
	}
}

// modelLine is the tray's line about the model.
func modelLine(m modelhost.ModelState) string {
	name := m.Name
	if m.Demo {
		name = "demo model " + m.Name
	}
	switch m.State {
	case modelhost.StateLoading:
		if m.Checking {
			return fmt.Sprintf("Checking the GPU for %s…", name)
		}
		return fmt.Sprintf("Loading %s… %.0f %%", name, 100*m.Progress)
	case modelhost.StateReady:
		if m.Fallback != "" {
			return "Ready on the CPU: " + name
		}
		return "Ready: " + name
	case modelhost.StateError:
		return "Model error: " + m.Error
	case modelhost.StateUnloaded:
		return "Unloaded (idle): " + name
	}
	return "Model: starting…"
}

// downloadLine is the tray's line about the model download ("Downloading
// …: 45% (…), 12 min left"); "" when there is nothing to show.
func downloadLine(d service.DownloadState) string {
	switch d.State {
	case service.DownloadIdle, "":
		return ""
	case service.DownloadFailed:
		return "Download failed: open the window for what to do"
	}
	return d.Line
}
