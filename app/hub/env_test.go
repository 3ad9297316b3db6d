package hub

import (
	"os"
	"path/filepath"
	"testing"
)

func TestConfigFromEnv(t *testing.T) {
	home := t.TempDir()
	tokenHome := t.TempDir()
	if err := os.WriteFile(filepath.Join(tokenHome, "token"), []byte("hf_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		want Config
	}{
		{"defaults", nil, Config{Endpoint: DefaultEndpoint, CacheDir: filepath.Join(home, ".cache/huggingface/hub"), TokenFile: filepath.Join(home, ".cache/huggingface/token")}},
		{"XDG_CACHE_HOME", map[string]string{"XDG_CACHE_HOME": "/xdg"}, Config{Endpoint: DefaultEndpoint, CacheDir: "/xdg/huggingface/hub", TokenFile: "/xdg/huggingface/token"}},
		{"HF_HOME with its token file", map[string]string{"HF_HOME": tokenHome}, Config{Endpoint: DefaultEndpoint, CacheDir: filepath.Join(tokenHome, "hub"), TokenFile: filepath.Join(tokenHome, "token"), Token: "hf_fromfile"}},
		{"HF_TOKEN wins over the file", map[string]string{"HF_HOME": tokenHome, "HF_TOKEN": "hf_env"}, Config{Endpoint: DefaultEndpoint, CacheDir: filepath.Join(tokenHome, "hub"), TokenFile: filepath.Join(tokenHome, "token"), Token: "hf_env"}},
		{"HF_HUB_CACHE and HF_ENDPOINT", map[string]string{"HF_HUB_CACHE": "~/models", "HF_ENDPOINT": "https://hf-mirror.com/"}, Config{Endpoint: "https://hf-mirror.com", CacheDir: filepath.Join(home, "models"), TokenFile: filepath.Join(home, ".cache/huggingface/token")}},
		{"HF_HUB_OFFLINE=1", map[string]string{"HF_HUB_OFFLINE": "1"}, Config{Endpoint: DefaultEndpoint, CacheDir: filepath.Join(home, ".cache/huggingface/hub"), TokenFile: filepath.Join(home, ".cache/huggingface/token"), Offline: true}},
		{"HF_HUB_OFFLINE=true", map[string]string{"HF_HUB_OFFLINE": "true"}, Config{Endpoint: DefaultEndpoint, CacheDir: filepath.Join(home, ".cache/huggingface/hub"), TokenFile: filepath.Join(home, ".cache/huggingface/token"), Offline: true}},
		{"HF_HUB_OFFLINE=0", map[string]string{"HF_HUB_OFFLINE": "0"}, Config{Endpoint: DefaultEndpoint, CacheDir: filepath.Join(home, ".cache/huggingface/hub"), TokenFile: filepath.Join(home, ".cache/huggingface/token")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", home)
			for _, k := range []string{"XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "HF_ENDPOINT", "HF_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE"} {
				t.Setenv(k, tt.env[k])
			}
			got, err := ConfigFromEnv()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
