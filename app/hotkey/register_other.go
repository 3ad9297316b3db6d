//go:build !darwin

package hotkey

// Registration is a registered shortcut; there are none here.
type Registration struct{}

// Register answers ErrUnsupported: global shortcuts are macOS's only.
func Register(s Shortcut, pressed func(), onMain func(func())) (*Registration, error) {
	return nil, ErrUnsupported
}

// Unregister does nothing.
func (r *Registration) Unregister() error { return nil }
