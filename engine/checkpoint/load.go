package checkpoint

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// Layout is the on-disk convention of a checkpoint.
type Layout int

const (
	// MLX is the mlx-community layout: switch_mlp experts, norms stored as
	// 1+w, usually affine-quantized. It is the zero value because it is the
	// layout the app runs.
	MLX Layout = iota
	// Hub is the Hugging Face layout (Qwen/Qwen3.6-35B-A3B): norms stored
	// zero-centred, experts fused or per-expert.
	Hub
)

func (l Layout) String() string {
	if l == MLX {
		return "mlx"
	}
	return "hub"
}

// Model is a loaded checkpoint. Weights' matrices point into the mapped
// files: they stay valid until Close.
type Model struct {
	Dir        string
	Layout     Layout
	Weights    *model.Weights
	Generation model.Generation
	// Bytes is the total size of the mapped weight files.
	Bytes int64

	set    *safetensors.Set
	vision vision // the tower, bound by Vision on first use
}

// Load reads the config, maps the weights and binds them. Any problem is an
// *Error naming the file, the tensor or the field.
func Load(dir string) (*Model, error) {
	cfg, gen, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		kind := ErrWeights
		if errors.Is(err, safetensors.ErrMissingFile) {
			kind = ErrMissing
		}
		return nil, &Error{Kind: kind, Msg: err.Error(), Err: err}
	}
	w, layout, err := bind(dir, set, cfg)
	if err != nil {
		set.Close()
		return nil, err
	}
	for _, f := range set.Files {
		w.Mappings = append(w.Mappings, f.Mapping())
	}
	return &Model{Dir: dir, Layout: layout, Weights: w, Generation: gen, Bytes: set.Size(), set: set}, nil
}

// Close unmaps the weights. The Weights must not be used afterwards.
func (m *Model) Close() error {
	if m.set == nil {
		return nil
	}
	err := m.set.Close()
	m.set = nil
	return err
}

// Tensor gives access to a raw tensor of the checkpoint by name (including
// the skipped vision and MTP tensors), for tools and tests.
func (m *Model) Tensor(name string) (safetensors.Tensor, bool) {
	if m.set == nil {
		return safetensors.Tensor{}, false
	}
	return m.set.Tensor(name)
}

func fileOf(dir string, t safetensors.Tensor) string { return filepath.Join(dir, t.File) }

func shapeString(s []int) string {
	out := "["
	for i, d := range s {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprint(d)
	}
	return out + "]"
}
