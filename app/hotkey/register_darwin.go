//go:build darwin

package hotkey

import (
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
)

// The Carbon Event Manager's hot keys are still how macOS apps take a
// global shortcut: RegisterEventHotKey needs no Accessibility permission
// (an NSEvent global monitor would, and could only watch, not take, the
// keys). The calls go through purego, so this package needs no cgo.

// eventTypeSpec and eventHotKeyID are Carbon's structs of the same names.
type eventTypeSpec struct{ class, kind uint32 }

type eventHotKeyID struct{ signature, id uint32 }

// Carbon's constants (CarbonEvents.h, MacErrors.h).
const (
	kEventClassKeyboard     = 'k'<<24 | 'e'<<16 | 'y'<<8 | 'b'
	kEventHotKeyPressed     = 5
	kEventParamDirectObject = '-'<<24 | '-'<<16 | '-'<<8 | '-'
	typeEventHotKeyID       = 'h'<<24 | 'k'<<16 | 'i'<<8 | 'd'
	kEventHotKeyExclusive   = 1 << 0
	eventHotKeyExistsErr    = -9878
	eventHotKeyInvalidErr   = -9879
	// signature marks Suzuran's hot keys among the app's events.
	signature = 'S'<<24 | 'z'<<16 | 'r'<<8 | 'n'
)

var carbon struct {
	once sync.Once
	err  error

	getApplicationEventTarget func() uintptr
	installEventHandler       func(target, handler uintptr, count uintptr, types *eventTypeSpec, userData uintptr, out *uintptr) int32
	registerEventHotKey       func(code, modifiers uint32, id eventHotKeyID, target uintptr, options uint32, out *uintptr) int32
	unregisterEventHotKey     func(ref uintptr) int32
	getEventParameter         func(event uintptr, name, kind uint32, actualKind *uint32, size uintptr, actualSize *uintptr, data *eventHotKeyID) int32

	mu      sync.Mutex
	pressed map[uint32]func() // by hot key id
	nextID  uint32
}

// loadCarbon binds the functions and installs the one handler that all of
// Suzuran's hot keys share (purego callbacks are never freed, so there is
// one, which finds the hot key by its id).
func loadCarbon(onMain func(func())) error {
	carbon.once.Do(func() {
		lib, err := purego.Dlopen("/System/Library/Frameworks/Carbon.framework/Carbon", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			carbon.err = fmt.Errorf("loading the Carbon framework for the global shortcut: %w", err)
			return
		}
		purego.RegisterLibFunc(&carbon.getApplicationEventTarget, lib, "GetApplicationEventTarget")
		purego.RegisterLibFunc(&carbon.installEventHandler, lib, "InstallEventHandler")
		purego.RegisterLibFunc(&carbon.registerEventHotKey, lib, "RegisterEventHotKey")
		purego.RegisterLibFunc(&carbon.unregisterEventHotKey, lib, "UnregisterEventHotKey")
		purego.RegisterLibFunc(&carbon.getEventParameter, lib, "GetEventParameter")
		carbon.pressed = map[uint32]func(){}
		handler := purego.NewCallback(func(next, event, userData uintptr) uintptr {
			var id eventHotKeyID
			if carbon.getEventParameter(event, kEventParamDirectObject, typeEventHotKeyID, nil, 8, nil, &id) != 0 || id.signature != signature {
				return 0
			}
			carbon.mu.Lock()
			pressed := carbon.pressed[id.id]
			carbon.mu.Unlock()
			if pressed != nil {
				// Off the main thread: showing the window goes back to it.
				go pressed()
			}
			return 0
		})
		spec := eventTypeSpec{class: kEventClassKeyboard, kind: kEventHotKeyPressed}
		var status int32
		var ref uintptr
		onMain(func() {
			status = carbon.installEventHandler(carbon.getApplicationEventTarget(), handler, 1, &spec, 0, &ref)
		})
		if status != 0 {
			carbon.err = fmt.Errorf("installing the global shortcut's event handler: OSStatus %d", status)
		}
	})
	return carbon.err
}

// Registration is a registered shortcut.
type Registration struct {
	ref    uintptr
	id     uint32
	onMain func(func())
}

// Register takes shortcut s for the app: pressed runs (on its own
// goroutine) each time it is pressed, in any app. onMain runs a function on
// the main thread and returns when it has run, where Carbon's calls must be
// made. A shortcut another app or macOS holds is refused with an error
// that says so.
func Register(s Shortcut, pressed func(), onMain func(func())) (*Registration, error) {
	if err := loadCarbon(onMain); err != nil {
		return nil, err
	}
	carbon.mu.Lock()
	carbon.nextID++
	id := carbon.nextID
	carbon.pressed[id] = pressed
	carbon.mu.Unlock()
	var status int32
	var ref uintptr
	onMain(func() {
		status = carbon.registerEventHotKey(s.Key.Code, uint32(s.Modifiers), eventHotKeyID{signature: signature, id: id},
			carbon.getApplicationEventTarget(), kEventHotKeyExclusive, &ref)
	})
	if status != 0 {
		carbon.mu.Lock()
		delete(carbon.pressed, id)
		carbon.mu.Unlock()
		switch status {
		case eventHotKeyExistsErr:
			return nil, fmt.Errorf("%s (%s) is taken by another app or by macOS: choose another shortcut in Settings", s, s.Symbols())
		case eventHotKeyInvalidErr:
			return nil, fmt.Errorf("macOS does not accept %s (%s) as a shortcut: choose another in Settings", s, s.Symbols())
		}
		return nil, fmt.Errorf("macOS refused the shortcut %s (%s): OSStatus %d; choose another in Settings", s, s.Symbols(), status)
	}
	return &Registration{ref: ref, id: id, onMain: onMain}, nil
}

// Unregister gives the shortcut back.
func (r *Registration) Unregister() error {
	var status int32
	r.onMain(func() { status = carbon.unregisterEventHotKey(r.ref) })
	carbon.mu.Lock()
	delete(carbon.pressed, r.id)
	carbon.mu.Unlock()
	if status != 0 {
		return fmt.Errorf("giving back the global shortcut: OSStatus %d", status)
	}
	return nil
}
