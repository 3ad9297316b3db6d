//go:build smoke && linux

package main

// The desktop smoke test drives the real built app (bin/suzuran) the way
// a desktop would: an X server (Xvfb), a session bus, and a tray host. It
// runs through build/smoke.sh (`make smoke`), which provides the first two;
// this file is the tray host: it owns org.kde.StatusNotifierWatcher on the
// session bus, as a panel does, so the app's StatusNotifierItem registers
// with it exactly as on a desktop.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
	"github.com/suzuran-app/suzuran/app/service"
	"github.com/suzuran-app/suzuran/app/store"
	_ "modernc.org/sqlite" // reads the app's database
)

var (
	smokeBinary = flag.String("suzuran", "", "the built app to test (bin/suzuran)")
	smokeShot   = flag.String("screenshot", "", "where to keep the screenshot of the window (PNG)")
)

// A painted chat window has hundreds of colours (anti-aliased text, the
// accent colour, borders); a blank or failed WebView has one or two. The
// measured window at 880×680 had 523 colours with its background on 98.2 %
// of the pixels, so these bounds leave a wide margin on either side.
const (
	minWindowColours     = 32
	maxBackgroundPercent = 99.5
)

func TestDesktopSmoke(t *testing.T) {
	if *smokeBinary == "" {
		t.Fatal("-suzuran is required: the path of the built app (run through build/smoke.sh)")
	}
	for _, v := range []string{"DISPLAY", "DBUS_SESSION_BUS_ADDRESS"} {
		if os.Getenv(v) == "" {
			t.Fatalf("%s is not set: run this test through build/smoke.sh, which starts Xvfb and a session bus", v)
		}
	}

	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		t.Fatalf("connecting to the session bus: %v", err)
	}
	defer conn.Close()
	watcher := startWatcher(t, conn)

	stateDir := t.TempDir()
	// The app's settings, database and demo model in folders of its own;
	// the settings give the local API a port that is free now, and say the
	// welcome view was left before, so that the window opens on the chat
	// that the message is typed into (the first run's welcome view is
	// frontend/e2e's).
	home := t.TempDir()
	apiPort := freePort(t)
	writeSettings(t, filepath.Join(home, "config", "suzuran", "settings.json"), fmt.Sprintf(`{"api_port": %d, "welcome_seen": true}`, apiPort))
	dbPath := filepath.Join(home, "data", "suzuran", "suzuran.db")
	showcaseID := storeShowcase(t, dbPath)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var output bytes.Buffer
	app := exec.CommandContext(ctx, *smokeBinary, "--log-level", "debug")
	app.Env = append(os.Environ(), "XDG_STATE_HOME="+stateDir, "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
	app.Stdout, app.Stderr = &output, &output
	if err := app.Start(); err != nil {
		t.Fatalf("starting %s: %v", *smokeBinary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- app.Wait() }()
	defer func() {
		if app.ProcessState == nil {
			_ = app.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("app output:\n%s", output.String())
			if log, err := os.ReadFile(filepath.Join(stateDir, "suzuran", "suzuran.log")); err == nil {
				t.Logf("app log file:\n%s", log)
			}
		}
	}()

	// The window.
	window := waitForWindow(t, exited)
	t.Logf("window %s at %v", window.id, window.rect)
	checkWindowPainted(t, window, exited)
	checkShowcase(t, window, exited)

	item, menu, items := openTray(t, conn, watcher, exited)
	quitID := items[trayQuitTitle]
	// The model's line follows its state, to ready.
	const readyLine = "Ready: demo model Suzuran Tiny"
	waitFor(t, exited, "the tray to say "+readyLine, func() bool {
		_, ok := readMenu(t, menu)[readyLine]
		return ok
	})

	checkLocalAPISwitch(t, menu, items[trayAPITitle], apiPort, exited)
	checkMessageAnswered(t, window, dbPath, showcaseID, exited)
	checkViews(t, window, menu, items, exited)

	checkSecondLaunch(t, ctx, app.Env, window, exited)

	checkReopen(t, item, menu, items, exited)

	// "Quit" ends the process with status 0.
	clickMenuItem(t, menu, quitID)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after %q the app exited with %v, want status 0", trayQuitTitle, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the app was still running 20 s after %q was clicked", trayQuitTitle)
	}

	// The desktop app writes its log file under XDG_STATE_HOME.
	log, err := os.ReadFile(filepath.Join(stateDir, "suzuran", "suzuran.log"))
	if err != nil {
		t.Fatalf("the app left no log file: %v", err)
	}
	if !bytes.Contains(log, []byte(`"message":"quit from the tray"`)) {
		t.Errorf("the log file does not record the quit from the tray:\n%s", log)
	}
}

// openTray waits for the app's tray item to register with the watcher and
// reads its menu, which must hold the tray's items; it returns the item,
// its menu and the menu's item ids by title.
func openTray(t *testing.T, conn *dbus.Conn, watcher *watcher, exited <-chan error) (dbus.BusObject, dbus.BusObject, map[string]int32) {
	t.Helper()
	var itemService string
	select {
	case itemService = <-watcher.registered:
	case err := <-exited:
		t.Fatalf("the app exited before registering its tray item: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the app registered no StatusNotifierItem with the watcher within 30 s")
	}
	item := conn.Object(itemService, "/StatusNotifierItem")
	menuPath, err := item.GetProperty("org.kde.StatusNotifierItem.Menu")
	if err != nil {
		t.Fatalf("reading the tray item's Menu property: %v", err)
	}
	title, err := item.GetProperty("org.kde.StatusNotifierItem.Title")
	if err != nil || title.Value() != "Suzuran" {
		t.Errorf("tray item Title = %v (%v), want Suzuran", title.Value(), err)
	}
	checkTrayIcon(t, item)
	menu := conn.Object(itemService, menuPath.Value().(dbus.ObjectPath))
	items := readMenu(t, menu)
	t.Logf("tray menu: %v", items)
	if _, ok := items[trayOpenTitle]; !ok {
		t.Fatalf("the tray menu has no %q item: %v", trayOpenTitle, items)
	}
	if _, ok := items[trayQuitTitle]; !ok {
		t.Fatalf("the tray menu has no %q item: %v", trayQuitTitle, items)
	}
	for _, title := range []string{trayNewChatTitle, trayAPITitle, trayCopyURLTitle, traySettingsTitle, trayUpdateTitle} {
		if _, ok := items[title]; !ok {
			t.Errorf("the tray menu has no %q item: %v", title, items)
		}
	}
	return item, menu, items
}

// checkSecondLaunch: a second launch hands over to the first one, which
// shows its hidden window, and exits with 0; the first runs on.
func checkSecondLaunch(t *testing.T, ctx context.Context, env []string, window xWindow, exited <-chan error) {
	t.Helper()
	closeWindow(t, window.id)
	waitFor(t, exited, "the window to hide before a second launch", func() bool {
		_, err := findWindow()
		return err != nil
	})
	second := exec.CommandContext(ctx, *smokeBinary)
	second.Env = env
	if out, err := second.CombinedOutput(); err != nil {
		t.Errorf("a second launch: %v\n%s", err, out)
	}
	select {
	case err := <-exited:
		t.Fatalf("the first instance exited when a second was launched: %v", err)
	default:
	}
	waitFor(t, exited, "the first instance to show its window after a second launch", func() bool {
		_, err := findWindow()
		return err == nil
	})
	t.Log("a second launch exited with 0 and the first showed its window")
}

// checkReopen: closing the window hides it and leaves the app running in
// the tray; "Open Chat", "New Chat", "Settings…", or a left click on the
// icon (Activate), brings it back.
func checkReopen(t *testing.T, item, menu dbus.BusObject, items map[string]int32, exited <-chan error) {
	t.Helper()
	for _, reopen := range []struct {
		how  string
		call func()
	}{
		{"the " + trayOpenTitle + " menu item", func() { clickMenuItem(t, menu, items[trayOpenTitle]) }},
		{"the " + trayNewChatTitle + " menu item", func() { clickMenuItem(t, menu, items[trayNewChatTitle]) }},
		{"the " + traySettingsTitle + " menu item", func() { clickMenuItem(t, menu, items[traySettingsTitle]) }},
		{"a left click on the tray icon", func() {
			if err := item.Call("org.kde.StatusNotifierItem.Activate", 0, int32(0), int32(0)).Err; err != nil {
				t.Fatalf("Activate on the tray item: %v", err)
			}
		}},
	} {
		shown, err := findWindow()
		if err != nil {
			t.Fatal(err)
		}
		closeWindow(t, shown.id)
		waitFor(t, exited, "the window to hide after a close request", func() bool {
			_, err := findWindow()
			return err != nil
		})
		reopen.call()
		waitFor(t, exited, "the window to come back after "+reopen.how, func() bool {
			_, err := findWindow()
			return err == nil
		})
		t.Logf("the window hid on a close request, with the app running on, and came back with %s", reopen.how)
	}
}

// freePort returns a TCP port that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func writeSettings(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkLocalAPISwitch turns the Local API on from the tray, finds the port
// open (serving the chat UI) and the address in the menu, then turns it off
// and finds the port closed.
func checkLocalAPISwitch(t *testing.T, menu dbus.BusObject, apiID int32, port int, exited <-chan error) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	get := func() (int, error) {
		resp, err := http.Get(url + "/")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if _, err := get(); err == nil {
		t.Fatalf("%s answers before the Local API was switched on", url)
	}
	clickMenuItem(t, menu, apiID)
	waitFor(t, exited, "the Local API to answer at "+url, func() bool {
		status, err := get()
		return err == nil && status == http.StatusOK
	})
	// The same port serves the OpenAI-compatible API on the window's model.
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatalf("GET /v1/models: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Suzuran Tiny") {
		t.Errorf("GET /v1/models = %d %s; want the demo model listed", resp.StatusCode, body)
	}
	waitFor(t, exited, "the tray to show "+url, func() bool {
		_, ok := readMenu(t, menu)[url]
		return ok
	})
	t.Logf("Local API on: %s answers, and the tray shows it", url)
	clickMenuItem(t, menu, apiID)
	waitFor(t, exited, "the Local API's port to close", func() bool {
		_, err := get()
		return err != nil
	})
	t.Logf("Local API off: %s refuses connections", url)
}

// showcaseFile is the browser tests' Markdown showcase: a conversation as
// Export as JSON writes it, whose answer holds every block the window
// renders (headings, a table, code, a task list, a quote, math).
const showcaseFile = "../frontend/e2e/testdata/showcase.json"

// storeShowcase puts the showcase conversation into the app's database
// before the app starts, with the store's import (what the window's
// Import… calls), so that it is the one conversation in the list.
func storeShowcase(t *testing.T, dbPath string) int64 {
	t.Helper()
	text, err := os.ReadFile(showcaseFile)
	if err != nil {
		t.Fatal(err)
	}
	var in service.ExportedConversation
	if err := json.Unmarshal(text, &in); err != nil {
		t.Fatalf("%s: %v", showcaseFile, err)
	}
	if in.Settings == nil || len(in.Messages) != 2 {
		t.Fatalf("%s: want a question and an answer, with the conversation's settings", showcaseFile)
	}
	msgs := make([]store.Message, 0, len(in.Messages))
	for _, m := range in.Messages {
		msgs = append(msgs, store.Message{ID: m.ID, ParentID: m.ParentID, Role: m.Role, Content: m.Content,
			Status: m.Status, Stats: m.Stats, CreatedAt: m.CreatedAt})
	}
	db, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.ImportConversation(context.Background(), in.Title, in.CreatedAt, *in.Settings, msgs, in.Shown)
	if err != nil {
		t.Fatalf("storing the showcase: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// checkShowcase opens the showcase conversation from the keyboard, as a
// user without a mouse would, and photographs its answer. The window has
// just opened on a new chat with nothing focused; from there the sixth Tab
// reaches the search box and the seventh the conversation list's one stop,
// the showcase (the only conversation), as measured in WebKitGTK, whose Tab
// passes over links; Return opens it. (A change to the window's Tab order
// shows here as the window not changing.) Ctrl+I opens the conversation's
// settings sheet over it and Esc closes it; Ctrl+N then goes back to a new
// chat for the question that checkMessageAnswered types.
func checkShowcase(t *testing.T, window xWindow, exited <-chan error) {
	t.Helper()
	prev, err := screenshot()
	if err != nil {
		t.Fatal(err)
	}
	xdotool(t, "windowfocus", "--sync", window.id)
	xdotool(t, "key", "--delay", "50", "Tab", "Tab", "Tab", "Tab", "Tab", "Tab", "Tab", "Return")
	shot := checkViewShown(t, window, prev, "markdown", "seven Tabs and Return", exited)
	if *smokeShot != "" {
		saveImage(t, strings.TrimSuffix(*smokeShot, ".png")+"-markdown.png", shot)
	}
	xdotool(t, "key", "ctrl+i")
	sheet := checkViewShown(t, window, shot, "chat settings", "Ctrl+I", exited)
	if *smokeShot != "" {
		saveImage(t, strings.TrimSuffix(*smokeShot, ".png")+"-chat-settings.png", sheet)
	}
	xdotool(t, "key", "Escape")
	checkViewShown(t, window, sheet, "the showcase after the sheet", "Esc", exited)
	xdotool(t, "key", "ctrl+n")
	checkViewShown(t, window, shot, "new chat after the showcase", "Ctrl+N", exited)
}

func xdotool(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("xdotool", args...).CombinedOutput(); err != nil {
		t.Fatalf("xdotool %v: %v: %s", args, err, out)
	}
}

// checkMessageAnswered types a question into the window with xdotool and
// waits for the demo model's answer in the app's database, then keeps a
// screenshot of the window answering and checks that the window changed.
func checkMessageAnswered(t *testing.T, window xWindow, dbPath string, showcaseID int64, exited <-chan error) {
	t.Helper()
	before, err := screenshot()
	if err != nil {
		t.Fatal(err)
	}
	// No window manager runs under Xvfb: focus the window directly, then
	// click into the message box at the bottom of it.
	x, y := window.rect.Dx()*2/3, window.rect.Dy()-40
	for _, args := range [][]string{
		{"windowfocus", "--sync", window.id},
		{"mousemove", "--window", window.id, strconv.Itoa(x), strconv.Itoa(y)},
		{"click", "1"},
		{"type", "--delay", "30", "What does json.dumps do?"},
		{"key", "Return"},
	} {
		if out, err := exec.Command("xdotool", args...).CombinedOutput(); err != nil {
			t.Fatalf("xdotool %v: %v: %s", args, err, out)
		}
	}
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var question, answer string
	waitFor(t, exited, "the demo model's answer in the database", func() bool {
		err := db.QueryRow(`SELECT q.content, a.content FROM messages q JOIN messages a
			ON a.conversation_id = q.conversation_id AND a.id > q.id AND a.role = 'assistant'
			WHERE q.role = 'user' AND a.status = 'complete' AND q.conversation_id != ?
			ORDER BY a.id DESC LIMIT 1`, showcaseID).Scan(&question, &answer)
		return err == nil
	})
	if question != "What does json.dumps do?" || !strings.Contains(strings.ToLower(answer), "json") {
		t.Fatalf("the database holds question %q and answer %q; want the typed question and an answer about JSON", question, answer)
	}
	t.Logf("the database holds the typed question and the answer %q", answer)
	// Let the window paint the end of the answer, then photograph it.
	time.Sleep(time.Second) // the window's paint has no event this test can see
	after, err := screenshot()
	if err != nil {
		t.Fatal(err)
	}
	changed := changedPercent(before, after, window.rect)
	if changed < 1 {
		t.Errorf("only %.2f %% of the window changed after the answer; want the question and answer shown", changed)
	}
	t.Logf("%.1f %% of the window changed with the question and answer", changed)
	if *smokeShot != "" {
		saveImage(t, strings.TrimSuffix(*smokeShot, ".png")+"-answer.png", after)
	}
}

// checkViews opens the window's other main views from the tray (Settings,
// then a new chat) and photographs each: each must be painted (as
// checkWindowPainted judges) and differ from the view before it, which a
// page that did not follow the command would not.
func checkViews(t *testing.T, window xWindow, menu dbus.BusObject, items map[string]int32, exited <-chan error) {
	t.Helper()
	prev, err := screenshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, view := range []struct{ name, item string }{
		{"settings", traySettingsTitle},
		{"new-chat", trayNewChatTitle},
	} {
		clickMenuItem(t, menu, items[view.item])
		shot := checkViewShown(t, window, prev, view.name, fmt.Sprintf("%q", view.item), exited)
		if *smokeShot != "" {
			saveImage(t, strings.TrimSuffix(*smokeShot, ".png")+"-"+view.name+".png", shot)
		}
		prev = shot
	}
}

// checkViewShown waits for the window to change from prev after what was
// done (at least 5 % of its pixels), lets it finish painting, and checks
// that what it shows is painted, as checkWindowPainted judges.
func checkViewShown(t *testing.T, window xWindow, prev image.Image, name, after string, exited <-chan error) image.Image {
	t.Helper()
	var shot image.Image
	var changed float64
	var err error
	// The view paints within a moment; 20 s is for a loaded machine.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if shot, err = screenshot(); err != nil {
			t.Fatal(err)
		}
		if changed = changedPercent(prev, shot, window.rect); changed >= 5 {
			// Let it finish painting, then keep what it shows.
			time.Sleep(500 * time.Millisecond) // a window's paint has no event this test can see
			if shot, err = screenshot(); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: only %.2f %% of the window changed after %s; want the view shown", name, changed, after)
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the app exited while showing %s: %v", name, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	colours, background := colourStats(shot, window.rect)
	if colours < minWindowColours || background > maxBackgroundPercent {
		t.Errorf("%s looks blank: %d colours (want ≥ %d), background on %.1f %% (want ≤ %.1f %%)",
			name, colours, minWindowColours, background, maxBackgroundPercent)
	}
	t.Logf("%s: %.1f %% of the window changed; %d colours, background on %.1f %%", name, changed, colours, background)
	return shot
}

// changedPercent is the share of pixels inside r that differ between a and b.
func changedPercent(a, b image.Image, r image.Rectangle) float64 {
	r = r.Intersect(a.Bounds()).Intersect(b.Bounds())
	if r.Empty() {
		return 0
	}
	changed := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				changed++
			}
		}
	}
	return 100 * float64(changed) / float64(r.Dx()*r.Dy())
}

func saveImage(t *testing.T, path string, img image.Image) {
	f, err := os.Create(path)
	if err != nil {
		t.Errorf("saving %s: %v", path, err)
		return
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Errorf("saving %s: %v", path, err)
	}
	t.Logf("screenshot: %s", path)
}

// checkTrayIcon reads the item's IconPixmap, a(iiay): one ARGB image per
// size, which is what panels draw.
func checkTrayIcon(t *testing.T, item dbus.BusObject) {
	t.Helper()
	v, err := item.GetProperty("org.kde.StatusNotifierItem.IconPixmap")
	if err != nil {
		t.Fatalf("reading the tray icon: %v", err)
	}
	var pixmaps []struct {
		Width, Height int32
		ARGB          []byte
	}
	if err := dbus.Store([]any{v.Value()}, &pixmaps); err != nil {
		t.Fatalf("decoding the tray icon: %v", err)
	}
	if len(pixmaps) == 0 {
		t.Fatal("the tray item has no icon")
	}
	for _, p := range pixmaps {
		if p.Width <= 0 || len(p.ARGB) != int(4*p.Width*p.Height) {
			t.Errorf("tray icon %dx%d has %d bytes, want 4 per pixel", p.Width, p.Height, len(p.ARGB))
		}
	}
}

// watcher is the StatusNotifierWatcher side of the tray protocol: items
// call RegisterStatusNotifierItem on it, panels read its properties.
type watcher struct {
	registered chan string // bus name of each item that registers

	mu    sync.Mutex
	items []string
	props *prop.Properties
}

func startWatcher(t *testing.T, conn *dbus.Conn) *watcher {
	t.Helper()
	w := &watcher{registered: make(chan string, 4)}
	const path = "/StatusNotifierWatcher"
	const iface = "org.kde.StatusNotifierWatcher"
	if err := conn.ExportMethodTable(map[string]any{
		"RegisterStatusNotifierItem": w.registerItem,
		"RegisterStatusNotifierHost": func(string) *dbus.Error { return nil },
	}, path, iface); err != nil {
		t.Fatalf("exporting the watcher: %v", err)
	}
	props, err := prop.Export(conn, path, prop.Map{iface: {
		"RegisteredStatusNotifierItems":  {Value: []string{}, Emit: prop.EmitTrue},
		"IsStatusNotifierHostRegistered": {Value: true, Emit: prop.EmitTrue},
		"ProtocolVersion":                {Value: int32(0), Emit: prop.EmitTrue},
	}})
	if err != nil {
		t.Fatalf("exporting the watcher's properties: %v", err)
	}
	w.props = props
	reply, err := conn.RequestName(iface, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("owning %s on the test's session bus: reply %v, %v", iface, reply, err)
	}
	return w
}

// registerItem is RegisterStatusNotifierItem. Items pass either their
// object path (fyne.io/systray does) or a bus name; with a path, the item is
// the caller itself.
func (w *watcher) registerItem(sender dbus.Sender, service string) *dbus.Error {
	name := service
	if strings.HasPrefix(service, "/") {
		name = string(sender)
	}
	w.mu.Lock()
	w.items = append(w.items, name)
	items := append([]string(nil), w.items...)
	w.mu.Unlock()
	w.props.SetMust("org.kde.StatusNotifierWatcher", "RegisteredStatusNotifierItems", items)
	select {
	case w.registered <- name:
	default:
	}
	return nil
}

// menuLayout is com.canonical.dbusmenu's (ia{sv}av) layout node.
type menuLayout struct {
	ID       int32
	Props    map[string]dbus.Variant
	Children []dbus.Variant
}

// readMenu reads the whole menu and returns each labelled item's id.
func readMenu(t *testing.T, menu dbus.BusObject) map[string]int32 {
	t.Helper()
	var revision uint32
	var root menuLayout
	if err := menu.Call("com.canonical.dbusmenu.GetLayout", 0, int32(0), int32(-1), []string{}).Store(&revision, &root); err != nil {
		t.Fatalf("reading the tray menu (GetLayout): %v", err)
	}
	items := map[string]int32{}
	for _, child := range root.Children {
		var node menuLayout
		if err := dbus.Store([]any{child.Value()}, &node); err != nil {
			t.Fatalf("decoding a tray menu item: %v", err)
		}
		if label, ok := node.Props["label"].Value().(string); ok && label != "" {
			items[label] = node.ID
		}
	}
	return items
}

// clickMenuItem sends the event a panel sends when the user picks an item.
func clickMenuItem(t *testing.T, menu dbus.BusObject, id int32) {
	t.Helper()
	call := menu.Call("com.canonical.dbusmenu.Event", 0, id, "clicked", dbus.MakeVariant(""), uint32(time.Now().Unix()))
	if call.Err != nil {
		t.Fatalf("clicking tray menu item %d: %v", id, call.Err)
	}
}

// waitFor polls done for up to 20 s while the app keeps running.
func waitFor(t *testing.T, exited <-chan error, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case err := <-exited:
			t.Fatalf("the app exited while waiting for %s: %v", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// closeWindow asks a window to close as a window manager's close button
// does: an ICCCM WM_DELETE_WINDOW client message, sent through libX11
// (there is no window manager under Xvfb, and xdotool's windowclose
// destroys the window instead of asking).
func closeWindow(t *testing.T, id string) {
	t.Helper()
	window, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		t.Fatalf("window id %q: %v", id, err)
	}
	x11, err := purego.Dlopen("libX11.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatalf("loading libX11: %v", err)
	}
	defer purego.Dlclose(x11)
	var (
		xOpenDisplay  func(name string) uintptr
		xInternAtom   func(display uintptr, name string, onlyIfExists int32) uint64
		xSendEvent    func(display uintptr, window uint64, propagate int32, mask int64, event unsafe.Pointer) int32
		xFlush        func(display uintptr) int32
		xCloseDisplay func(display uintptr) int32
	)
	purego.RegisterLibFunc(&xOpenDisplay, x11, "XOpenDisplay")
	purego.RegisterLibFunc(&xInternAtom, x11, "XInternAtom")
	purego.RegisterLibFunc(&xSendEvent, x11, "XSendEvent")
	purego.RegisterLibFunc(&xFlush, x11, "XFlush")
	purego.RegisterLibFunc(&xCloseDisplay, x11, "XCloseDisplay")

	display := xOpenDisplay(os.Getenv("DISPLAY"))
	if display == 0 {
		t.Fatalf("XOpenDisplay(%q) failed", os.Getenv("DISPLAY"))
	}
	defer xCloseDisplay(display)
	// XClientMessageEvent on LP64, as 8-byte words of the 192-byte XEvent:
	// type, serial, send_event, display, window, message_type, format,
	// then data.l[0..4].
	const clientMessage = 33
	var event [24]uint64
	event[0] = clientMessage
	event[2] = 1
	event[3] = uint64(display)
	event[4] = window
	event[5] = xInternAtom(display, "WM_PROTOCOLS", 0)
	event[6] = 32
	event[7] = xInternAtom(display, "WM_DELETE_WINDOW", 0)
	if xSendEvent(display, window, 0, 0, unsafe.Pointer(&event)) == 0 {
		t.Fatal("XSendEvent of WM_DELETE_WINDOW failed")
	}
	xFlush(display)
}

type xWindow struct {
	id   string
	rect image.Rectangle
}

// findWindow finds the app's visible top-level window by its title.
func findWindow() (xWindow, error) {
	out, err := exec.Command("xdotool", "search", "--onlyvisible", "--name", "^Suzuran$").Output()
	ids := strings.Fields(string(out))
	if err != nil || len(ids) == 0 {
		return xWindow{}, fmt.Errorf("no visible window titled Suzuran (xdotool: %v)", err)
	}
	w := xWindow{id: ids[0]}
	geometry, err := exec.Command("xdotool", "getwindowgeometry", "--shell", w.id).Output()
	if err != nil {
		return xWindow{}, fmt.Errorf("xdotool getwindowgeometry %s: %w", w.id, err)
	}
	values := map[string]int{}
	for _, line := range strings.Fields(string(geometry)) {
		key, value, _ := strings.Cut(line, "=")
		n, err := strconv.Atoi(value)
		if err == nil {
			values[key] = n
		}
	}
	w.rect = image.Rect(values["X"], values["Y"], values["X"]+values["WIDTH"], values["Y"]+values["HEIGHT"])
	if w.rect.Empty() {
		return xWindow{}, fmt.Errorf("window %s has no size: %s", w.id, geometry)
	}
	return w, nil
}

func waitForWindow(t *testing.T, exited <-chan error) xWindow {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		w, err := findWindow()
		if err == nil {
			return w
		}
		select {
		case err := <-exited:
			t.Fatalf("the app exited before showing its window: %v", err)
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no window within 60 s: %v", err)
		}
	}
}

// checkWindowPainted takes screenshots until the window shows the page
// (WebKit paints a moment after the window maps) or the time runs out.
func checkWindowPainted(t *testing.T, w xWindow, exited <-chan error) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		shot, err := screenshot()
		if err != nil {
			t.Fatal(err)
		}
		colours, background := colourStats(shot, w.rect)
		if colours >= minWindowColours && background <= maxBackgroundPercent {
			t.Logf("window shows %d colours, background on %.1f %% of it", colours, background)
			keepScreenshot(t, shot)
			return
		}
		if time.Now().After(deadline) {
			keepScreenshot(t, shot)
			t.Fatalf("the window looks blank: %d colours (want ≥ %d), background on %.1f %% (want ≤ %.1f %%)",
				colours, minWindowColours, background, maxBackgroundPercent)
		}
		select {
		case err := <-exited:
			t.Fatalf("the app exited while its window was painting: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// screenshot grabs the whole X screen with ImageMagick's import.
func screenshot() (image.Image, error) {
	out, err := exec.Command("import", "-window", "root", "png:-").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, fmt.Errorf("import -window root: %v: %s", err, exit.Stderr)
		}
		return nil, fmt.Errorf("import -window root: %w", err)
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("decoding the screenshot: %w", err)
	}
	return img, nil
}

// colourStats counts the distinct colours inside r and the share of the
// most common one, in percent.
func colourStats(img image.Image, r image.Rectangle) (colours int, topPercent float64) {
	r = r.Intersect(img.Bounds())
	rgba := image.NewRGBA(r)
	draw.Draw(rgba, r, img, r.Min, draw.Src)
	counts := map[uint32]int{}
	top := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			i := rgba.PixOffset(x, y)
			key := uint32(rgba.Pix[i])<<16 | uint32(rgba.Pix[i+1])<<8 | uint32(rgba.Pix[i+2])
			counts[key]++
			top = max(top, counts[key])
		}
	}
	if r.Empty() {
		return 0, 100
	}
	return len(counts), 100 * float64(top) / float64(r.Dx()*r.Dy())
}

func keepScreenshot(t *testing.T, img image.Image) {
	if *smokeShot == "" {
		return
	}
	f, err := os.Create(*smokeShot)
	if err != nil {
		t.Errorf("saving the screenshot: %v", err)
		return
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Errorf("saving the screenshot: %v", err)
	}
	t.Logf("screenshot: %s", *smokeShot)
}
