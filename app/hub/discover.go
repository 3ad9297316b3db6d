package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/suzuran-app/suzuran/app/settings"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// Validate checks a model folder the way the engine will load it: the
// config, every tensor's name, shape and dtype against it (the weights are
// mapped, not read), and the tokenizer. The error names the file and what
// to do.
func Validate(dir string) error {
	m, err := checkpoint.Load(dir)
	if err != nil {
		return err
	}
	m.Close()
	if _, err := tokenizer.Load(dir); err != nil {
		return fmt.Errorf("%s: %w; download the model again or pick its complete folder", filepath.Join(dir, "tokenizer.json"), err)
	}
	return nil
}

// Where a found model lives, for people.
const (
	SourceHFCache  = "Hugging Face cache"
	SourceLMStudio = "LM Studio"
	SourceFolder   = "folder"
)

// Found is a model folder found on this machine.
type Found struct {
	// Name is the repository id ("mlx-community/Qwen3.6-35B-A3B-4bit"):
	// from the cache folder's name, or LM Studio's publisher/model folders.
	Name string `json:"name"`
	// Dir is the folder the engine loads.
	Dir string `json:"dir"`
	// Source is SourceHFCache, SourceLMStudio or SourceFolder.
	Source string `json:"source"`
	// Commit is the snapshot's commit in the Hugging Face cache; Refs the
	// branches and tags that point at it.
	Commit string   `json:"commit,omitempty"`
	Refs   []string `json:"refs,omitempty"`
	// Size is the folder's total size, links followed.
	Size int64 `json:"size"`
	// Err is why the engine cannot use it; nil when it can. In JSON it is
	// "problem", "" when valid.
	Err error `json:"-"`
}

// Valid reports whether the engine can load the model.
func (f Found) Valid() bool { return f.Err == nil }

// MarshalJSON adds valid and problem (Err's message) for the UI.
func (f Found) MarshalJSON() ([]byte, error) {
	type plain Found
	problem := ""
	if f.Err != nil {
		problem = f.Err.Error()
	}
	return json.Marshal(struct {
		plain
		Valid   bool   `json:"valid"`
		Problem string `json:"problem"`
	}{plain(f), f.Err == nil, problem})
}

// UseModel validates a model folder and saves it as the "model" setting in
// the settings file at settingsPath; a folder the engine cannot load is
// refused with the reason and the settings are left as they were.
func UseModel(settingsPath, dir string) (Found, error) {
	f := Inspect(dir)
	if f.Err != nil {
		return f, fmt.Errorf("%s cannot be used: %w", f.Dir, f.Err)
	}
	return f, settings.SetModel(settingsPath, f.Dir)
}

// Places are the folders Discover looks in.
type Places struct {
	// HFCache is the Hugging Face hub cache.
	HFCache string
	// LMStudio are LM Studio's models folders, each holding
	// <publisher>/<model>/ folders.
	LMStudio []string
}

// DefaultPlaces are the cache of cfg and LM Studio's two usual folders
// (~/.lmstudio/models, and ~/.cache/lm-studio/models of older versions).
func DefaultPlaces(cfg Config) Places {
	p := Places{HFCache: cfg.CacheDir}
	if home, err := os.UserHomeDir(); err == nil {
		p.LMStudio = []string{
			filepath.Join(home, ".lmstudio", "models"),
			filepath.Join(home, ".cache", "lm-studio", "models"),
		}
	}
	return p
}

// Discover lists the model folders in places that hold a config.json, each
// validated with Validate; folders of other models are listed too, with the
// reason in Err. Missing places are skipped.
func Discover(p Places) ([]Found, error) {
	var out []Found
	if p.HFCache != "" {
		snaps, err := Cache{Dir: p.HFCache}.Snapshots()
		if err != nil {
			return nil, err
		}
		for _, s := range snaps {
			if !exists(filepath.Join(s.Dir, "config.json")) {
				continue
			}
			out = append(out, inspect(Found{Name: s.Repo, Dir: s.Dir, Source: SourceHFCache, Commit: s.Commit, Refs: s.Refs}))
		}
	}
	seen := map[string]bool{}
	for _, root := range p.LMStudio {
		publishers, err := os.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading LM Studio's models folder %s: %w", root, err)
		}
		for _, pub := range publishers {
			models, err := os.ReadDir(filepath.Join(root, pub.Name()))
			if err != nil {
				continue
			}
			for _, m := range models {
				dir := filepath.Join(root, pub.Name(), m.Name())
				real, err := filepath.EvalSymlinks(dir)
				if err != nil || seen[real] || !exists(filepath.Join(dir, "config.json")) {
					continue
				}
				seen[real] = true
				out = append(out, inspect(Found{Name: pub.Name() + "/" + m.Name(), Dir: dir, Source: SourceLMStudio}))
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Valid() != out[j].Valid() {
			return out[i].Valid()
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Inspect validates a folder the user picked.
func Inspect(dir string) Found {
	abs, err := filepath.Abs(dir)
	if err == nil {
		dir = abs
	}
	f := Found{Name: filepath.Base(dir), Dir: dir, Source: SourceFolder}
	// A snapshot of a Hugging Face cache: models--<org>--<name>/snapshots/<commit>.
	if snapshots := filepath.Dir(dir); filepath.Base(snapshots) == "snapshots" {
		if org, name, ok := strings.Cut(strings.TrimPrefix(filepath.Base(filepath.Dir(snapshots)), "models--"), "--"); ok {
			f.Name, f.Source, f.Commit = org+"/"+name, SourceHFCache, filepath.Base(dir)
		}
	}
	return inspect(f)
}

func inspect(f Found) Found {
	f.Size = dirSize(f.Dir)
	f.Err = Validate(f.Dir)
	return f
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// globSafetensors returns the sizes of a folder's .safetensors files.
func globSafetensors(dir string) []int64 {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	var sizes []int64
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			sizes = append(sizes, st.Size())
		}
	}
	return sizes
}
