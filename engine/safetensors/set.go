package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Names of the weight files in a model folder.
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// ErrMissingFile is matched when a folder has neither model.safetensors nor
// model.safetensors.index.json, or the index names a shard that is absent.
var ErrMissingFile = errors.New("missing safetensors file")

// Set is every tensor of a model folder, from one file or several shards.
type Set struct {
	Dir     string
	Files   []*File
	tensors map[string]Tensor
}

// OpenDir opens the weights of a model folder: the shards listed by
// model.safetensors.index.json when it exists, else model.safetensors.
func OpenDir(dir string) (*Set, error) {
	idxPath := filepath.Join(dir, IndexFileName)
	if _, err := os.Stat(idxPath); err == nil {
		return openIndex(dir, idxPath)
	}
	single := filepath.Join(dir, SingleFileName)
	if _, err := os.Stat(single); err != nil {
		return nil, fmt.Errorf("%s: %w: neither %s nor %s is present: download the model's weights into this folder", dir, ErrMissingFile, SingleFileName, IndexFileName)
	}
	f, err := Open(single)
	if err != nil {
		return nil, err
	}
	s := &Set{Dir: dir, Files: []*File{f}, tensors: f.tensors}
	return s, nil
}

type indexFile struct {
	WeightMap map[string]string `json:"weight_map"`
}

func openIndex(dir, idxPath string) (*Set, error) {
	raw, err := os.ReadFile(idxPath)
	if err != nil {
		return nil, err
	}
	var idx indexFile
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w: not valid JSON: %v", idxPath, ErrInvalid, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: %w: weight_map is empty", idxPath, ErrInvalid)
	}
	shards := map[string]bool{}
	for _, shard := range idx.WeightMap {
		if shard == "" || filepath.Base(shard) != shard {
			return nil, fmt.Errorf("%s: %w: shard name %q must be a plain file name in the model folder", idxPath, ErrInvalid, shard)
		}
		shards[shard] = true
	}
	names := make([]string, 0, len(shards))
	for s := range shards {
		names = append(names, s)
	}
	sort.Strings(names)
	s := &Set{Dir: dir, tensors: map[string]Tensor{}}
	for _, shard := range names {
		p := filepath.Join(dir, shard)
		if _, err := os.Stat(p); err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: %w: shard %s is listed in %s but absent: the download is incomplete", dir, ErrMissingFile, shard, IndexFileName)
		}
		f, err := Open(p)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Files = append(s.Files, f)
		for name, t := range f.tensors {
			if prev, dup := s.tensors[name]; dup {
				s.Close()
				return nil, fmt.Errorf("%s: %w: tensor %s is stored in both %s and %s", dir, ErrInvalid, name, prev.File, t.File)
			}
			s.tensors[name] = t
		}
	}
	for name, shard := range idx.WeightMap {
		t, ok := s.tensors[name]
		if !ok {
			s.Close()
			return nil, fmt.Errorf("%s: %w: %s maps tensor %s to %s, which does not contain it", dir, ErrInvalid, IndexFileName, name, shard)
		}
		if t.File != shard {
			s.Close()
			return nil, fmt.Errorf("%s: %w: %s maps tensor %s to %s, but it is in %s", dir, ErrInvalid, IndexFileName, name, shard, t.File)
		}
	}
	return s, nil
}

// Tensor returns the named tensor.
func (s *Set) Tensor(name string) (Tensor, bool) {
	t, ok := s.tensors[name]
	return t, ok
}

// Names lists every tensor, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.tensors))
	for n := range s.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Len is the number of tensors.
func (s *Set) Len() int { return len(s.tensors) }

// Size is the total size of the mapped files in bytes.
func (s *Set) Size() int64 {
	var n int64
	for _, f := range s.Files {
		n += f.Size()
	}
	return n
}

// Close unmaps every file.
func (s *Set) Close() error {
	var first error
	for _, f := range s.Files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.Files = nil
	s.tensors = nil
	return first
}
