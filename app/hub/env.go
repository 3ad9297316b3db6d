package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultRepo is the model the app downloads unless told otherwise.
const DefaultRepo = "mlx-community/Qwen3.6-35B-A3B-4bit"

// DefaultRepoBytes is about what DefaultRepo's files take (its listing on
// the hub: 20.4 GB, almost all of it weights). The machine check uses it
// when the hub cannot be asked; the listing's own figure replaces it once
// the hub answers.
const DefaultRepoBytes = 20_400_000_000

// DefaultEndpoint is the Hugging Face hub.
const DefaultEndpoint = "https://huggingface.co"

// Config is where the hub is and where its files go, read from the
// environment the way huggingface_hub reads it, so that the two agree on
// the cache and the token.
type Config struct {
	// Endpoint is the hub's base URL (HF_ENDPOINT).
	Endpoint string
	// Token authenticates requests to the hub, for gated and private
	// repositories; "" sends none.
	Token string
	// TokenFile is the file a token is read from when HF_TOKEN is unset
	// (HF_TOKEN_PATH, else $HF_HOME/token): named in the 401/403 errors.
	TokenFile string
	// CacheDir is the hub cache (HF_HUB_CACHE, else $HF_HOME/hub, else
	// ~/.cache/huggingface/hub: the same folder on macOS as on Linux).
	CacheDir string
	// Offline forbids network requests (HF_HUB_OFFLINE): only complete
	// cached snapshots are used.
	Offline bool
}

// ConfigFromEnv reads Config from the environment.
func ConfigFromEnv() (Config, error) {
	home := os.Getenv("HF_HOME")
	if home == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			userHome, err := os.UserHomeDir()
			if err != nil {
				return Config{}, fmt.Errorf("no home folder to put the Hugging Face cache in (%v): set HF_HOME or HF_HUB_CACHE", err)
			}
			base = filepath.Join(userHome, ".cache")
		}
		home = filepath.Join(base, "huggingface")
	}
	home = expandHome(home)
	cfg := Config{
		Endpoint:  strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"),
		CacheDir:  expandHome(os.Getenv("HF_HUB_CACHE")),
		TokenFile: expandHome(os.Getenv("HF_TOKEN_PATH")),
		Offline:   truthy(os.Getenv("HF_HUB_OFFLINE")),
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(home, "hub")
	}
	if cfg.TokenFile == "" {
		cfg.TokenFile = filepath.Join(home, "token")
	}
	cfg.Token = strings.TrimSpace(os.Getenv("HF_TOKEN"))
	if cfg.Token == "" {
		data, err := os.ReadFile(cfg.TokenFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Config{}, fmt.Errorf("reading the Hugging Face token %s: %w", cfg.TokenFile, err)
		}
		cfg.Token = strings.TrimSpace(string(data))
	}
	return cfg, nil
}

// truthy is huggingface_hub's reading of a boolean variable.
func truthy(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// expandHome turns a leading ~ into the home folder, as Python's
// os.path.expanduser does for these variables.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, p[1:])
		}
	}
	return p
}
