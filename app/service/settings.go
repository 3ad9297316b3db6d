package service

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/suzuran-app/suzuran/app/hotkey"
	"github.com/suzuran-app/suzuran/app/settings"
	"github.com/suzuran-app/suzuran/app/store"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// Settings are the user's choices in the Settings view. They live in
// settings.json beside the "model" key that the command line reads, one
// top-level key each, so that the file stays readable and other features
// can keep their own keys in it.
type Settings struct {
	SystemPrompt string `json:"system_prompt"`
	// SamplingPreset is one of the Preset constants; Custom holds the
	// values used with PresetCustom.
	SamplingPreset string   `json:"sampling_preset"`
	Custom         Sampling `json:"sampling"`
	// Thinking is the thinking switch's last position.
	Thinking bool `json:"thinking"`
	// ContextTokens bounds a conversation (prompt and answer); 0 is the
	// model's own limit, up to 32,768.
	ContextTokens int `json:"context_tokens"`
	// Parallel is how many requests the engine decodes together; 0 is the
	// backend's default (4 on the GPU, 2 on the CPU).
	Parallel int `json:"parallel"`
	// APIMaxTokens bounds the answer of an API request that gives no
	// max_tokens; 0 leaves only the context as its bound.
	APIMaxTokens int `json:"api_max_tokens"`
	// The local API: its port, whether it listens beyond this computer (it
	// then needs APIKey), and the origins of web pages allowed to call it.
	APIPort        int      `json:"api_port"`
	APILAN         bool     `json:"api_lan"`
	APIKey         string   `json:"api_key"`
	APICORSOrigins []string `json:"api_cors_origins"`
	LaunchAtLogin  bool     `json:"launch_at_login"`
	// KeepAliveMinutes unloads the model after this many idle minutes, to
	// give its memory back; 0 keeps it loaded.
	KeepAliveMinutes int `json:"keep_alive_minutes"`
	// CheckForUpdates lets the app read the project's releases feed once a
	// day and say when a newer version is out; nothing is downloaded.
	CheckForUpdates bool `json:"check_for_updates"`
	// GlobalShortcut opens the chat window from any app (macOS), written as
	// app/hotkey reads it ("Option+Space"); "" is none.
	GlobalShortcut string `json:"global_shortcut"`
	// PrefixCacheGB bounds the folder of prefix snapshots on disk (a long
	// document read once is read back from there after a restart), in
	// GiB; 0 is engine/prefixstore's default, 8 GiB.
	PrefixCacheGB int `json:"prefix_cache_gb"`
}

// Sampling is a sampling rule as the Settings view edits it.
type Sampling struct {
	Temperature     float64 `json:"temperature"`
	TopP            float64 `json:"top_p"`
	TopK            int     `json:"top_k"`
	MinP            float64 `json:"min_p"`
	PresencePenalty float64 `json:"presence_penalty"`
}

// Sampling presets: the model card's (engine/sample), and the user's own.
const (
	PresetAuto        = "auto" // the model card's thinking or non-thinking values, following the thinking switch
	PresetThinking    = sample.PresetThinking
	PresetNonThinking = sample.PresetNonThinking
	PresetCoding      = sample.PresetCoding
	PresetCustom      = "custom"
)

// preset is the model card's preset name as the Settings view edits it,
// in the decimals the card writes (0.95, not float32's 0.949999988).
func preset(name string) Sampling {
	p, _ := sample.Preset(name)
	return Sampling{Temperature: decimal(p.Temperature), TopP: decimal(p.TopP), TopK: p.TopK,
		MinP: decimal(p.MinP), PresencePenalty: decimal(p.PresencePenalty)}
}

// decimal is the shortest decimal that reads back as f.
func decimal(f float32) float64 {
	d, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return d
}

// SamplingFor is the rule a request uses under settings s.
func (s Settings) SamplingFor(thinking bool) Sampling {
	switch s.SamplingPreset {
	case PresetCustom:
		return s.Custom
	case PresetThinking, PresetNonThinking, PresetCoding:
		return preset(s.SamplingPreset)
	}
	if thinking {
		return preset(PresetThinking)
	}
	return preset(PresetNonThinking)
}

// TurnSettings are what one turn of a conversation uses: the
// conversation's own settings where it has them, else the app's.
type TurnSettings struct {
	SystemPrompt string
	// Think is whether the model thinks (before the demo model's own
	// refusal to).
	Think bool
	app   Settings
}

// Sampling is the rule the turn samples with, given whether the model
// thinks.
func (t TurnSettings) Sampling(thinking bool) Sampling { return t.app.SamplingFor(thinking) }

// For is what a turn of a conversation with its own settings cs uses
// under the app's settings s; think is the window's thinking switch,
// which the conversation's own "on" or "off" overrides.
func (s Settings) For(cs store.ChatSettings, think bool) TurnSettings {
	t := TurnSettings{SystemPrompt: s.SystemPrompt, Think: think, app: s}
	if cs.SystemPrompt != "" {
		t.SystemPrompt = cs.SystemPrompt
	}
	switch cs.Thinking {
	case store.ThinkingOn:
		t.Think = true
	case store.ThinkingOff:
		t.Think = false
	}
	if cs.SamplingPreset != "" {
		t.app.SamplingPreset = cs.SamplingPreset
	}
	return t
}

// checkChatSettings checks a conversation's own settings, naming the
// first bad one and what it accepts.
func checkChatSettings(cs store.ChatSettings) error {
	switch cs.SamplingPreset {
	case "", PresetAuto, PresetThinking, PresetNonThinking, PresetCoding, PresetCustom:
	default:
		return fmt.Errorf("sampling preset %q: use auto, thinking, non-thinking, coding, custom, or nothing to follow Settings", cs.SamplingPreset)
	}
	switch cs.Thinking {
	case "", store.ThinkingOn, store.ThinkingOff:
	default:
		return fmt.Errorf("thinking %q: use on, off, or nothing to follow the thinking switch", cs.Thinking)
	}
	if len(cs.SystemPrompt) > maxSystemPrompt {
		return fmt.Errorf("the system prompt is %d KB: keep it under %d KB (attach a long text as a document instead)", len(cs.SystemPrompt)>>10, maxSystemPrompt>>10)
	}
	return nil
}

// maxSystemPrompt bounds a conversation's system prompt: far more than a
// prompt of instructions, far less than a context.
const maxSystemPrompt = 64 << 10

// DefaultSettings are what a first start uses.
func DefaultSettings() Settings {
	return Settings{
		SamplingPreset:   PresetAuto,
		Custom:           preset(PresetNonThinking),
		Thinking:         true,
		APIPort:          11435, // server.DefaultAddr's port
		APICORSOrigins:   []string{},
		KeepAliveMinutes: 0,
		CheckForUpdates:  true,
		GlobalShortcut:   hotkey.DefaultShortcut,
	}
}

// Validate checks s, naming the first bad field and what it accepts.
func (s Settings) Validate() error {
	switch s.SamplingPreset {
	case PresetAuto, PresetThinking, PresetNonThinking, PresetCoding, PresetCustom:
	default:
		return fmt.Errorf("sampling preset %q: use auto, thinking, non-thinking, coding or custom", s.SamplingPreset)
	}
	c := s.Custom
	switch {
	case c.Temperature < 0 || c.Temperature > 2:
		return fmt.Errorf("temperature %v: use 0 (greedy) to 2", c.Temperature)
	case c.TopP <= 0 || c.TopP > 1:
		return fmt.Errorf("top-p %v: use a value above 0 and at most 1", c.TopP)
	case c.TopK < 0:
		return fmt.Errorf("top-k %d: use 0 (off) or more", c.TopK)
	case c.MinP < 0 || c.MinP >= 1:
		return fmt.Errorf("min-p %v: use 0 (off) to below 1", c.MinP)
	case c.PresencePenalty < -2 || c.PresencePenalty > 2:
		return fmt.Errorf("presence penalty %v: use -2 to 2", c.PresencePenalty)
	}
	if s.ContextTokens != 0 && (s.ContextTokens < 512 || s.ContextTokens > 262144) {
		return fmt.Errorf("context length %d: use 0 (the model's) or 512 to 262,144 tokens", s.ContextTokens)
	}
	if s.APIPort < 1 || s.APIPort > 65535 {
		return fmt.Errorf("API port %d: use 1 to 65535 (1024 and above need no administrator)", s.APIPort)
	}
	for _, origin := range s.APICORSOrigins {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("CORS origin %q: write a scheme and host, such as http://localhost:3000", origin)
		}
	}
	if s.Parallel < 0 || s.Parallel > 16 {
		return fmt.Errorf("parallel requests %d: use 0 (the backend's default) to 16", s.Parallel)
	}
	if s.APIMaxTokens < 0 {
		return fmt.Errorf("default max tokens of API requests %d: use 0 (the context's room) or more", s.APIMaxTokens)
	}
	if s.GlobalShortcut != "" {
		if _, err := hotkey.Parse(s.GlobalShortcut); err != nil {
			return err
		}
	}
	if s.PrefixCacheGB < 0 || s.PrefixCacheGB > 4096 {
		return fmt.Errorf("prefix cache size %d GiB: use 0 (the default, 8 GiB) to 4,096", s.PrefixCacheGB)
	}
	if s.KeepAliveMinutes < 0 {
		return fmt.Errorf("keep-alive %d minutes: use 0 (keep the model loaded) or more", s.KeepAliveMinutes)
	}
	return nil
}

// settingsFile reads and writes the app's keys of settings.json through
// app/settings, leaving every other key as it was.
type settingsFile struct{ path string }

// load returns the settings, defaults filling the keys that are absent,
// and the "model" key.
func (f settingsFile) load() (Settings, string, error) {
	s := DefaultSettings()
	raw, err := settings.Read(f.path)
	if err != nil {
		return s, "", err
	}
	// Unmarshalling the object again over the defaults sets exactly the
	// keys that are present.
	data, _ := json.Marshal(raw)
	if err := json.Unmarshal(data, &s); err != nil {
		return DefaultSettings(), "", fmt.Errorf("%s: %w; fix the value or remove the key", f.path, err)
	}
	if s.APICORSOrigins == nil {
		s.APICORSOrigins = []string{}
	}
	var model string
	if m, ok := raw["model"]; ok {
		json.Unmarshal(m, &model)
	}
	return s, model, nil
}

// flag reads a true/false key that is not part of Settings; absent or
// unreadable, it is false.
func (f settingsFile) flag(key string) bool {
	raw, err := settings.Read(f.path)
	if err != nil {
		return false
	}
	var on bool
	json.Unmarshal(raw[key], &on)
	return on
}

// save writes s's keys into the file, keeping the others.
func (f settingsFile) save(s Settings) error {
	var fields map[string]json.RawMessage
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	json.Unmarshal(data, &fields)
	return settings.Update(f.path, fields)
}

// newAPIKey makes the key the API requires once it listens beyond this
// computer: 32 random bytes.
func newAPIKey() string {
	var b [32]byte
	rand.Read(b[:])
	return "sk-suzuran-" + hex.EncodeToString(b[:])
}

// normaliseOrigins trims and drops empty origins and a trailing slash.
func normaliseOrigins(origins []string) []string {
	out := []string{}
	for _, o := range origins {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		if o != "" {
			out = append(out, o)
		}
	}
	return out
}
