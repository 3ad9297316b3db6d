package modelhost

import (
	"path/filepath"
	"strings"

	"github.com/suzuran-app/suzuran/assets/models"
)

// Name is what the model in dir is called, in the window and in the API.
func Name(dir string) string {
	if IsDemo(dir) {
		return models.DemoName
	}
	// A snapshot in the Hugging Face cache is called by its repository:
	// models--<org>--<name>/snapshots/<commit>.
	if snapshots := filepath.Dir(filepath.Clean(dir)); filepath.Base(snapshots) == "snapshots" {
		if org, name, ok := strings.Cut(strings.TrimPrefix(filepath.Base(filepath.Dir(snapshots)), "models--"), "--"); ok {
			return org + "/" + name
		}
	}
	return filepath.Base(filepath.Clean(dir))
}

// IsDemo reports whether dir is the installed demo model Suzuran Tiny.
func IsDemo(dir string) bool { return filepath.Base(dir) == models.FolderName() }

// Capabilities are what a model can do, stated once for the window, the
// API and the terminal chat.
type Capabilities struct {
	// Thinking is false for the demo model, which was trained without
	// thinking: asked to think, it writes template text where the
	// thinking goes.
	Thinking bool
}

// CapabilitiesOf returns what the model in dir can do.
func CapabilitiesOf(dir string) Capabilities { return Capabilities{Thinking: !IsDemo(dir)} }

// Think is whether a turn that asked for thinking (or not) thinks on the
// model in dir: never on a model that cannot.
func Think(dir string, asked bool) bool { return asked && CapabilitiesOf(dir).Thinking }
