package hotkey

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, canonical, symbols string
		modifiers              Modifier
		code                   uint32
	}{
		{"Option+Space", "Option+Space", "⌥Space", Option, 0x31},
		{DefaultShortcut, "Option+Space", "⌥Space", Option, 0x31},
		{"Cmd+Shift+K", "Shift+Cmd+K", "⇧⌘K", Cmd | Shift, 0x28},
		{" cmd + shift + k ", "Shift+Cmd+K", "⇧⌘K", Cmd | Shift, 0x28},
		{"alt+space", "Option+Space", "⌥Space", Option, 0x31},
		{"Control+Option+Command+Shift+A", "Ctrl+Option+Shift+Cmd+A", "⌃⌥⇧⌘A", Ctrl | Option | Shift | Cmd, 0x00},
		{"⌥Space", "Option+Space", "⌥Space", Option, 0x31},
		{"⇧⌘K", "Shift+Cmd+K", "⇧⌘K", Cmd | Shift, 0x28},
		{"⌃⌥+Return", "Ctrl+Option+Return", "⌃⌥Return", Ctrl | Option, 0x24},
		{"Ctrl+Enter", "Ctrl+Return", "⌃Return", Ctrl, 0x24},
		{"Opt+1", "Option+1", "⌥1", Option, 0x12},
		{"Cmd+/", "Cmd+/", "⌘/", Cmd, 0x2C},
		{"Cmd+Option+Up", "Option+Cmd+Up", "⌥⌘Up", Option | Cmd, 0x7E},
		{"F5", "F5", "F5", 0, 0x60},
		{"Shift+F12", "Shift+F12", "⇧F12", Shift, 0x6F},
		{"Cmd+Esc", "Cmd+Escape", "⌘Escape", Cmd, 0x35},
	} {
		s, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if s.String() != tc.canonical || s.Symbols() != tc.symbols || s.Modifiers != tc.modifiers || s.Key.Code != tc.code {
			t.Errorf("Parse(%q) = %s %s modifiers %#x code %#x; want %s %s %#x %#x",
				tc.in, s, s.Symbols(), s.Modifiers, s.Key.Code, tc.canonical, tc.symbols, tc.modifiers, tc.code)
		}
		// The canonical name reads back as the same shortcut.
		if again, err := Parse(s.String()); err != nil || again != s {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", s.String(), again, err, s)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"   ", "empty"},
		{"Space", "needs Ctrl, Option or Cmd"},
		{"Shift+K", "needs Ctrl, Option or Cmd"},
		{"Option", "no key after its modifiers"},
		{"Cmd+Shift", "no key after its modifiers"},
		{"Cmd+", "empty part"},
		{"Cmd++", "empty part"},
		{"Option+Option+Space", "names Option twice"},
		{"Cmd+K+J", `"K" is not a modifier`},
		{"Hyper+Space", `"Hyper" is not a modifier`},
		{"Cmd+Banana", `"Banana" is not a key`},
		{"Cmd+F13", `"F13" is not a key`},
		{"Cmd+é", `"é" is not a key`},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
}

// Carbon's key codes are positions on an ANSI keyboard, not letters in
// order: a few that a wrong table would get wrong.
func TestKeyCodes(t *testing.T) {
	for name, code := range map[string]uint32{"A": 0x00, "B": 0x0B, "Q": 0x0C, "Z": 0x06, "O": 0x1F, "0": 0x1D, "5": 0x17, "6": 0x16, "F1": 0x7A, "F2": 0x78, "Tab": 0x30, "Delete": 0x33} {
		if got := keys[name].Code; got != code {
			t.Errorf("key %s has code %#x, want %#x", name, got, code)
		}
	}
	seen := map[uint32]string{}
	for name, k := range keys {
		if other, ok := seen[k.Code]; ok {
			t.Errorf("keys %s and %s share code %#x", name, other, k.Code)
		}
		seen[k.Code] = name
	}
}
