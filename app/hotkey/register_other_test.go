//go:build !darwin

package hotkey

import (
	"errors"
	"testing"
)

// Off macOS, Register says global shortcuts are macOS's only.
func TestRegisterElsewhere(t *testing.T) {
	s, _ := Parse(DefaultShortcut)
	if _, err := Register(s, func() {}, func(f func()) { f() }); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Register: %v, want ErrUnsupported", err)
	}
}
