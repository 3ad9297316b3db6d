//go:build !darwin

package backends

// platformKinds: Metal exists only on macOS.
func platformKinds() []kind { return nil }
