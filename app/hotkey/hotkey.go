// Package hotkey reads, checks and registers the global shortcut that opens
// the chat window from any app (macOS only; default ⌥Space).
//
// A shortcut is written as its parts joined by "+": modifiers (Ctrl,
// Option, Shift, Cmd, with their usual aliases and the symbols ⌃⌥⇧⌘) then
// one key ("Option+Space", "Cmd+Shift+K", "⌃⌥F5"). Parse turns that into a
// Shortcut, which knows its canonical name and the Carbon key code and
// modifier mask that RegisterEventHotKey takes; those are plain data, tested
// on every system. Register (register_darwin.go) hands a Shortcut to the
// Carbon Event Manager through purego, without cgo, as the tray's AppKit
// calls are made; elsewhere it answers ErrUnsupported.
package hotkey

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultShortcut is the shortcut a first start registers.
const DefaultShortcut = "Option+Space"

// ErrUnsupported is Register's answer where there are no global shortcuts
// (every system but macOS).
var ErrUnsupported = errors.New("global shortcuts are available on macOS only")

// Modifier is a set of modifier keys, as Carbon's masks (Events.h:
// cmdKey, shiftKey, optionKey, controlKey).
type Modifier uint32

// The modifiers, in the order macOS writes them (⌃⌥⇧⌘).
const (
	Ctrl   Modifier = 1 << 12
	Option Modifier = 1 << 11
	Shift  Modifier = 1 << 9
	Cmd    Modifier = 1 << 8
)

var modifierOrder = []struct {
	mod    Modifier
	name   string
	symbol string
}{
	{Ctrl, "Ctrl", "⌃"}, {Option, "Option", "⌥"}, {Shift, "Shift", "⇧"}, {Cmd, "Cmd", "⌘"},
}

// modifierNames are the accepted spellings of each modifier, lower case.
var modifierNames = map[string]Modifier{
	"ctrl": Ctrl, "control": Ctrl, "⌃": Ctrl,
	"option": Option, "opt": Option, "alt": Option, "⌥": Option,
	"shift": Shift, "⇧": Shift,
	"cmd": Cmd, "command": Cmd, "⌘": Cmd,
}

// Key is a key by its name ("Space", "K", "F5") and its Carbon virtual key
// code (kVK_* in HIToolbox's Events.h: positions on an ANSI keyboard).
type Key struct {
	Name string
	Code uint32
}

// keys are the keys a shortcut may use, by canonical name.
var keys = func() map[string]Key {
	codes := map[string]uint32{
		"A": 0x00, "S": 0x01, "D": 0x02, "F": 0x03, "H": 0x04, "G": 0x05, "Z": 0x06, "X": 0x07,
		"C": 0x08, "V": 0x09, "B": 0x0B, "Q": 0x0C, "W": 0x0D, "E": 0x0E, "R": 0x0F, "Y": 0x10,
		"T": 0x11, "1": 0x12, "2": 0x13, "3": 0x14, "4": 0x15, "6": 0x16, "5": 0x17, "=": 0x18,
		"9": 0x19, "7": 0x1A, "-": 0x1B, "8": 0x1C, "0": 0x1D, "]": 0x1E, "O": 0x1F, "U": 0x20,
		"[": 0x21, "I": 0x22, "P": 0x23, "Return": 0x24, "L": 0x25, "J": 0x26, "'": 0x27, "K": 0x28,
		";": 0x29, "\\": 0x2A, ",": 0x2B, "/": 0x2C, "N": 0x2D, "M": 0x2E, ".": 0x2F, "Tab": 0x30,
		"Space": 0x31, "`": 0x32, "Delete": 0x33, "Escape": 0x35,
		"F1": 0x7A, "F2": 0x78, "F3": 0x63, "F4": 0x76, "F5": 0x60, "F6": 0x61, "F7": 0x62, "F8": 0x64,
		"F9": 0x65, "F10": 0x6D, "F11": 0x67, "F12": 0x6F,
		"Left": 0x7B, "Right": 0x7C, "Down": 0x7D, "Up": 0x7E,
	}
	out := make(map[string]Key, len(codes))
	for name, code := range codes {
		out[name] = Key{Name: name, Code: code}
	}
	return out
}()

// keyAliases are other spellings of keys, lower case.
var keyAliases = map[string]string{
	"spacebar": "Space", "enter": "Return", "esc": "Escape", "backspace": "Delete",
	"left arrow": "Left", "right arrow": "Right", "up arrow": "Up", "down arrow": "Down",
	"minus": "-", "equal": "=", "comma": ",", "period": ".", "slash": "/", "backslash": "\\",
	"semicolon": ";", "quote": "'", "backquote": "`", "bracketleft": "[", "bracketright": "]",
}

// Shortcut is a checked shortcut.
type Shortcut struct {
	Modifiers Modifier
	Key       Key
}

// String is the shortcut's canonical name ("Option+Space"), which Parse
// reads back.
func (s Shortcut) String() string {
	var parts []string
	for _, m := range modifierOrder {
		if s.Modifiers&m.mod != 0 {
			parts = append(parts, m.name)
		}
	}
	return strings.Join(append(parts, s.Key.Name), "+")
}

// Symbols is the shortcut as a Mac menu shows it ("⌥Space", "⇧⌘K").
func (s Shortcut) Symbols() string {
	var b strings.Builder
	for _, m := range modifierOrder {
		if s.Modifiers&m.mod != 0 {
			b.WriteString(m.symbol)
		}
	}
	b.WriteString(s.Key.Name)
	return b.String()
}

// isFunctionKey reports whether k is F1…F12, which may go without a
// modifier.
func isFunctionKey(k Key) bool {
	return len(k.Name) >= 2 && k.Name[0] == 'F' && k.Name[1] >= '1' && k.Name[1] <= '9'
}

// Parse reads a shortcut such as "Option+Space" or "Cmd+Shift+K"; case and
// spaces around the parts do not matter. It refuses what would take keys
// away from typing: a shortcut needs Ctrl, Option or Cmd, unless its key is
// a function key.
func Parse(text string) (Shortcut, error) {
	const advice = `write modifiers and one key joined by "+", such as Option+Space or Cmd+Shift+K`
	trimmed := strings.TrimSpace(text)
	if trimmed == "" {
		return Shortcut{}, fmt.Errorf("the shortcut is empty: %s", advice)
	}
	var parts []string
	// Leading modifier symbols may be written without "+" (⌥Space, ⇧⌘K).
	rest := trimmed
	for {
		cut := false
		for _, m := range modifierOrder {
			if after, ok := strings.CutPrefix(rest, m.symbol); ok {
				parts, rest, cut = append(parts, m.symbol), strings.TrimLeft(after, "+ "), true
			}
		}
		if !cut {
			break
		}
	}
	if rest != "" {
		// "+" on its own is not a key here: "Cmd++" has no key after it.
		parts = append(parts, strings.Split(rest, "+")...)
	}
	var s Shortcut
	for i, part := range parts {
		part = strings.TrimSpace(part)
		if part == "" {
			return Shortcut{}, fmt.Errorf("shortcut %q has an empty part: %s", text, advice)
		}
		last := i == len(parts)-1
		if mod, ok := modifierNames[strings.ToLower(part)]; ok {
			if last {
				return Shortcut{}, fmt.Errorf("shortcut %q has no key after its modifiers: %s", text, advice)
			}
			if s.Modifiers&mod != 0 {
				return Shortcut{}, fmt.Errorf("shortcut %q names %s twice: %s", text, part, advice)
			}
			s.Modifiers |= mod
			continue
		}
		if !last {
			return Shortcut{}, fmt.Errorf("shortcut %q: %q is not a modifier (Ctrl, Option, Shift or Cmd), and only the last part is the key: %s", text, part, advice)
		}
		key, ok := lookupKey(part)
		if !ok {
			return Shortcut{}, fmt.Errorf("shortcut %q: %q is not a key a shortcut can use: use a letter, a digit, Space, Return, Tab, Escape, Delete, an arrow, F1 to F12 or one of - = [ ] ; ' , . / \\ `", text, part)
		}
		s.Key = key
	}
	if s.Modifiers&(Ctrl|Option|Cmd) == 0 && !isFunctionKey(s.Key) {
		return Shortcut{}, fmt.Errorf("shortcut %q needs Ctrl, Option or Cmd (without them it would take %s away from typing in every app)", text, s.Key.Name)
	}
	return s, nil
}

func lookupKey(part string) (Key, bool) {
	if alias, ok := keyAliases[strings.ToLower(part)]; ok {
		part = alias
	}
	if k, ok := keys[strings.ToUpper(part)]; ok {
		return k, true
	}
	for name, k := range keys {
		if strings.EqualFold(name, part) {
			return k, true
		}
	}
	return Key{}, false
}
