package imageproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// Config is the image processor's part of a checkpoint: its
// preprocessor_config.json.
type Config struct {
	PatchSize         int
	TemporalPatchSize int
	MergeSize         int
	// MinPixels and MaxPixels bound the pixel count of the resized image
	// (size.shortest_edge and size.longest_edge: pixel counts, not edges).
	MinPixels int
	MaxPixels int
	// RescaleFactor maps uint8 samples to [0, 1] (1/255).
	RescaleFactor float64
	Mean, Std     [3]float64
}

// DefaultMaxPixels is the default for the largest image the model sees,
// 1,310,720 pixels (1,280 merged tokens of 32 × 32 pixels). The checkpoint
// allows 16,777,216 pixels, about 16,000 tokens for one photo: a
// 12-megapixel phone photo (4032 × 3024) would fill a quarter of a 64k
// context and take minutes to encode. At this default the same photo
// becomes 1312 × 960 pixels, 1,230 tokens, a 2880 × 1800 screenshot
// 1440 × 896, 1,260 tokens, where body text is still legible; it is the
// budget Qwen's own processors default to (1,280 tokens). Smaller images
// are not enlarged by it.
const DefaultMaxPixels = 1280 * 32 * 32

// Qwen36Config is the processor of Qwen3.6 as its checkpoint ships it.
func Qwen36Config() Config {
	return Config{
		PatchSize: 16, TemporalPatchSize: 2, MergeSize: 2,
		MinPixels: 65536, MaxPixels: 16777216,
		RescaleFactor: 1.0 / 255,
		Mean:          [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5},
	}
}

// LoadConfig reads dir/preprocessor_config.json.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "preprocessor_config.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, fmt.Errorf("image processor: %s has no preprocessor_config.json: the checkpoint ships none, so it reads no images", dir)
	}
	if err != nil {
		return Config{}, fmt.Errorf("image processor: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("image processor: %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig reads a preprocessor_config.json. Missing fields take the
// Qwen2-VL processor's defaults where they have one; min_pixels and
// max_pixels, the older spelling, are read when size is absent.
func ParseConfig(data []byte) (Config, error) {
	var aux struct {
		Size *struct {
			ShortestEdge *int `json:"shortest_edge"`
			LongestEdge  *int `json:"longest_edge"`
		} `json:"size"`
		MinPixels         *int      `json:"min_pixels"`
		MaxPixels         *int      `json:"max_pixels"`
		PatchSize         *int      `json:"patch_size"`
		TemporalPatchSize *int      `json:"temporal_patch_size"`
		MergeSize         *int      `json:"merge_size"`
		RescaleFactor     *float64  `json:"rescale_factor"`
		ImageMean         []float64 `json:"image_mean"`
		ImageStd          []float64 `json:"image_std"`
		DoRescale         *bool     `json:"do_rescale"`
		DoNormalize       *bool     `json:"do_normalize"`
		DoResize          *bool     `json:"do_resize"`
		Resample          *int      `json:"resample"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return Config{}, err
	}
	// The Qwen2-VL processor's class defaults (CLIP mean and std, patch
	// 14), which a checkpoint's file overrides.
	cfg := Config{
		PatchSize: 14, TemporalPatchSize: 2, MergeSize: 2,
		MinPixels: 56 * 56, MaxPixels: 28 * 28 * 1280,
		RescaleFactor: 1.0 / 255,
		Mean:          [3]float64{0.48145466, 0.4578275, 0.40821073},
		Std:           [3]float64{0.26862954, 0.26130258, 0.27577711},
	}
	setInt := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setInt(&cfg.PatchSize, aux.PatchSize)
	setInt(&cfg.TemporalPatchSize, aux.TemporalPatchSize)
	setInt(&cfg.MergeSize, aux.MergeSize)
	setInt(&cfg.MinPixels, aux.MinPixels)
	setInt(&cfg.MaxPixels, aux.MaxPixels)
	if aux.Size != nil {
		if aux.Size.ShortestEdge == nil || aux.Size.LongestEdge == nil {
			return Config{}, errors.New("size must hold shortest_edge and longest_edge (the minimum and maximum pixel counts)")
		}
		cfg.MinPixels, cfg.MaxPixels = *aux.Size.ShortestEdge, *aux.Size.LongestEdge
	}
	if aux.RescaleFactor != nil {
		cfg.RescaleFactor = *aux.RescaleFactor
	}
	for name, v := range map[string][]float64{"image_mean": aux.ImageMean, "image_std": aux.ImageStd} {
		if v == nil {
			continue
		}
		if len(v) != 3 {
			return Config{}, fmt.Errorf("%s has %d values, not 3 (one per colour channel)", name, len(v))
		}
	}
	if aux.ImageMean != nil {
		copy(cfg.Mean[:], aux.ImageMean)
	}
	if aux.ImageStd != nil {
		copy(cfg.Std[:], aux.ImageStd)
	}
	switch {
	case aux.DoRescale != nil && !*aux.DoRescale, aux.DoNormalize != nil && !*aux.DoNormalize, aux.DoResize != nil && !*aux.DoResize:
		return Config{}, errors.New("do_rescale, do_normalize and do_resize must be true: the processor implements that pipeline only")
	case aux.Resample != nil && *aux.Resample != 3:
		return Config{}, fmt.Errorf("resample %d: only bicubic (3) is implemented", *aux.Resample)
	}
	return cfg, cfg.validate()
}

func (c Config) validate() error {
	switch {
	case c.PatchSize <= 0 || c.TemporalPatchSize <= 0 || c.MergeSize <= 0:
		return fmt.Errorf("patch_size %d, temporal_patch_size %d and merge_size %d must be positive", c.PatchSize, c.TemporalPatchSize, c.MergeSize)
	case c.MinPixels <= 0 || c.MaxPixels < c.MinPixels:
		return fmt.Errorf("the pixel bounds %d..%d are not a range of positive pixel counts", c.MinPixels, c.MaxPixels)
	case c.RescaleFactor <= 0:
		return fmt.Errorf("rescale_factor %g must be positive", c.RescaleFactor)
	}
	for i, s := range c.Std {
		if s == 0 {
			return fmt.Errorf("image_std[%d] is 0", i)
		}
	}
	return nil
}

// WithMaxPixels returns c with its maximum pixel count lowered to limit (the
// setting for the largest image the model sees); a limit of 0 or one above
// the checkpoint's limit leaves the checkpoint's. It never goes below the
// checkpoint's minimum.
func (c Config) WithMaxPixels(limit int) Config {
	if limit > 0 && limit < c.MaxPixels {
		c.MaxPixels = max(limit, c.MinPixels)
	}
	return c
}

// Factor is the side every resized dimension is a multiple of: one merged
// token's patch × merge (32 pixels for Qwen3.6).
func (c Config) Factor() int { return c.PatchSize * c.MergeSize }

// PatchDim is the width of a row of pixel values: 3 channels × the
// temporal patch × patch × patch (1536 for Qwen3.6).
func (c Config) PatchDim() int { return 3 * c.TemporalPatchSize * c.PatchSize * c.PatchSize }

// SmartResize returns the size (height, width) an image of height × width
// is resized to, as transformers' smart_resize computes it: each side
// rounded (half to even) to a multiple of Factor, then, if the pixel count
// is above MaxPixels or below MinPixels, both sides scaled by the square
// root of the ratio and floored (above) or ceiled (below) to multiples.
// An aspect ratio above 200 is refused, as the reference refuses it.
func (c Config) SmartResize(height, width int) (int, int, error) {
	if height <= 0 || width <= 0 {
		return 0, 0, fmt.Errorf("an image of %d × %d pixels has no area", width, height)
	}
	if err := c.validate(); err != nil {
		return 0, 0, err
	}
	if r := float64(max(height, width)) / float64(min(height, width)); r > 200 {
		return 0, 0, fmt.Errorf("an image of %d × %d pixels is %.0f times longer than it is wide; the model reads images up to 200 times: crop it", width, height, r)
	}
	f := float64(c.Factor())
	h := int(math.RoundToEven(float64(height)/f)) * c.Factor()
	w := int(math.RoundToEven(float64(width)/f)) * c.Factor()
	switch {
	case h*w > c.MaxPixels:
		beta := math.Sqrt(float64(height) * float64(width) / float64(c.MaxPixels))
		h = max(c.Factor(), int(math.Floor(float64(height)/beta/f))*c.Factor())
		w = max(c.Factor(), int(math.Floor(float64(width)/beta/f))*c.Factor())
	case h*w < c.MinPixels:
		beta := math.Sqrt(float64(c.MinPixels) / (float64(height) * float64(width)))
		h = int(math.Ceil(float64(height)*beta/f)) * c.Factor()
		w = int(math.Ceil(float64(width)*beta/f)) * c.Factor()
	}
	return h, w, nil
}

// Grid is an image's patch grid (t, h, w) for an image of height × width:
// the image_grid_thw of the reference.
func (c Config) Grid(height, width int) ([3]int, error) {
	h, w, err := c.SmartResize(height, width)
	if err != nil {
		return [3]int{}, err
	}
	return [3]int{1, h / c.PatchSize, w / c.PatchSize}, nil
}

// TokenCost is the number of <|image_pad|> tokens an image of width ×
// height pixels (as displayed, after EXIF orientation) takes in the
// prompt: t·h·w / merge².
func (c Config) TokenCost(width, height int) (int, error) {
	g, err := c.Grid(height, width)
	if err != nil {
		return 0, err
	}
	return g[0] * g[1] * g[2] / (c.MergeSize * c.MergeSize), nil
}
