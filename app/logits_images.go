package main

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/suzuran-app/suzuran/engine/imageproc"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// logitsImages reads `suzuran logits`' images: with pixelValues, the k-th
// file's pixels and grid from that reference file's tensors named after
// it; without, through the image processor of the checkpoint in modelDir,
// at its own limits (the reference's), not the chat's lower default.
func logitsImages(files []string, pixelValues, modelDir string) ([]model.Image, error) {
	if len(files) == 0 {
		if pixelValues != "" {
			return nil, errors.New("--pixel-values needs the images it holds named with --image")
		}
		return nil, nil
	}
	if pixelValues == "" {
		cfg, err := imageproc.LoadConfig(modelDir)
		if err != nil {
			return nil, fmt.Errorf("--image: %w", err)
		}
		var out []model.Image
		for _, f := range files {
			im, err := processImage(cfg, f)
			if err != nil {
				return nil, err
			}
			out = append(out, im)
		}
		return out, nil
	}
	ref, err := safetensors.Open(pixelValues)
	if err != nil {
		return nil, fmt.Errorf("--pixel-values: %w", err)
	}
	defer ref.Close()
	var out []model.Image
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		pv, ok1 := ref.Tensor(name + ".pixel_values")
		g, ok2 := ref.Tensor(name + ".grid_thw")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("--pixel-values %s has no %s.pixel_values and %s.grid_thw for --image %s", pixelValues, name, name, f)
		}
		if pv.DType != safetensors.F32 || len(pv.Shape) != 2 || g.NumElements() != 3 || (g.DType != safetensors.I32) {
			return nil, fmt.Errorf("--pixel-values %s: %s.pixel_values must be F32 [patches, width] and %s.grid_thw I32 [3] (they are %v %v and %v %v)",
				pixelValues, name, name, pv.DType, pv.Shape, g.DType, g.Shape)
		}
		px, err := safetensors.ToFloat32(pv)
		if err != nil {
			return nil, err
		}
		im := model.Image{Pixels: px}
		for i := range 3 {
			im.Grid[i] = int(int32(binary.LittleEndian.Uint32(g.Data[4*i:])))
		}
		// The image's identity: its file's bytes when it is there, else
		// the pixels.
		if raw, err := os.ReadFile(f); err == nil {
			im.Hash = sha256.Sum256(raw)
		} else {
			im.Hash = sha256.Sum256(pv.Data)
		}
		out = append(out, im)
	}
	return out, nil
}

// processImage turns an image file into the tower's pixel rows through
// the image processor cfg; its identity is the file's bytes.
func processImage(cfg imageproc.Config, path string) (model.Image, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return model.Image{}, fmt.Errorf("--image: %w", err)
	}
	if len(data) > imageproc.MaxFileBytes {
		return model.Image{}, fmt.Errorf("--image %s: the file is larger than the %d MB an image may be", path, imageproc.MaxFileBytes>>20)
	}
	img, _, err := imageproc.Decode(data)
	if err != nil {
		return model.Image{}, fmt.Errorf("--image %s: %w", path, err)
	}
	px, err := cfg.Process(img)
	if err != nil {
		return model.Image{}, fmt.Errorf("--image %s: %w", path, err)
	}
	return model.Image{Pixels: px.Values, Grid: px.Grid, Hash: sha256.Sum256(data)}, nil
}
