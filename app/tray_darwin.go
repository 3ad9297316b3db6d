//go:build darwin

package main

import (
	"fmt"
	"sync"

	"fyne.io/systray"
	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"github.com/suzuran-app/suzuran/assets"
)

// On macOS, Wails owns the main thread ([NSApp run]) and calls OnStartup on
// another goroutine, but AppKit objects such as the NSStatusItem must be
// made on the main thread. startTray therefore queues the tray's creation on
// the main dispatch queue, which AppKit drains once [NSApp run] is past
// finishLaunching.
//
// Wails sets NSApplicationActivationPolicyRegular in
// applicationWillFinishLaunching, overriding LSUIElement, so the Dock icon
// appears; showAppWindow sets the Accessory policy back (menu bar only, as
// LSUIElement intends) before it shows the window.
func startTray(nativeUp func()) {
	onMainThread(nativeUp)
}

// stopTray does nothing on macOS: systray's end function would terminate
// NSApp from inside Wails' own shutdown, and the status item goes with the
// process anyway.
func stopTray(func()) {}

func setTrayIcon() { systray.SetTemplateIcon(assets.TrayTemplate, assets.TrayTemplate) }

// On macOS a click on the menu-bar icon opens the menu (the platform's
// convention); "Open Suzuran" is in it.
func setTrayClick(func()) {}

const nsApplicationActivationPolicyAccessory = 1

func nsApp() objc.ID {
	return objc.ID(objc.GetClass("NSApplication")).Send(objc.RegisterName("sharedApplication"))
}

// The main dispatch queue, reached through libSystem with purego so that
// this file needs no cgo of its own.
var mainQueue struct {
	once       sync.Once
	queue      uintptr // &_dispatch_main_q, what dispatch_get_main_queue() returns
	asyncF     func(queue, context, work uintptr)
	trampoline uintptr

	mu      sync.Mutex
	pending map[uintptr]func()
	nextID  uintptr
}

func initMainQueue() {
	lib, err := purego.Dlopen("/usr/lib/libSystem.B.dylib", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		panic(fmt.Sprintf("loading libSystem for the main dispatch queue: %v", err))
	}
	queue, err := purego.Dlsym(lib, "_dispatch_main_q")
	if err != nil {
		panic(fmt.Sprintf("finding the main dispatch queue: %v", err))
	}
	mainQueue.queue = queue
	purego.RegisterLibFunc(&mainQueue.asyncF, lib, "dispatch_async_f")
	mainQueue.pending = map[uintptr]func(){}
	// One C callback for every job: purego callbacks are never freed, so
	// jobs are looked up by the context value instead of each getting its
	// own callback.
	mainQueue.trampoline = purego.NewCallback(func(id uintptr) {
		mainQueue.mu.Lock()
		job := mainQueue.pending[id]
		delete(mainQueue.pending, id)
		mainQueue.mu.Unlock()
		if job != nil {
			job()
		}
	})
}

// onMainThread runs job on the main thread, asynchronously.
func onMainThread(job func()) {
	mainQueue.once.Do(initMainQueue)
	mainQueue.mu.Lock()
	mainQueue.nextID++
	id := mainQueue.nextID
	mainQueue.pending[id] = job
	mainQueue.mu.Unlock()
	mainQueue.asyncF(mainQueue.queue, id, mainQueue.trampoline)
}
